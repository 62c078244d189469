// Matrix-vector products against weights stored in their GGUF block formats, the
// decode hot path on CPU: y[t, n] = sum_k x[t, k] * W[n, k]. Quantised weights are
// multiplied as integers against activations quantised once per call to int8 blocks
// of 32 (like llama.cpp's q8_1), so no weight is ever dequantised to f32 in memory;
// f16/bf16 weights are widened to f32 on the fly. Each weight row is read once for
// all activation rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace anymoe::kernels {

// Elements per activation quantisation block (one f32 scale per block).
inline constexpr int64_t kActivationBlock = 32;

// View of the activation buffer written by QuantizeActivations. For quantised
// weight types (the same layout for all of them):
//   qs[t][k]      int8, x[r][i] ~= d[r][i / 32] * qs[r][i], round to nearest
//   d[t][k / 32]  f32 scale of each block of 32 (max |x| / 127)
//   s[t][k / 32]  f32 d * (sum of the block's qs), for the offsets and mins of
//                 q4_0 / q4_1 / q4_k / q5_1 and the unsigned VNNI form of q8_0
//   sum[t][k / 32] int32 sum of the block's qs, for exact integer offsets
// For f16/bf16 weights the buffer holds x itself: f32[t][k] (`f32`), so those
// products are exact f32 arithmetic.
struct QuantizedActivations {
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const float* s = nullptr;
  const int32_t* sum = nullptr;
  const float* f32 = nullptr;
  int64_t t = 0, k = 0;
};

// True for q8_0, q4_0, q4_1, q4_k, q6_k, f16 and bf16, and the low-bit types
// q5_0, q5_1, q2_k, q3_k, q5_k, iq4_nl, iq4_xs, mxfp4 and the codebook i-quants
// iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s.
bool IsQuantMatmulSupported(DType weight_type);

// Up to how many activation rows these kernels beat dequantising W for an f32
// GEMM, on the target this machine dispatches to: every row count for f16 /
// bf16 (they are the f32 kernels of float_matmul.h) and where a register-
// blocked integer kernel exists (q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl on
// x86 AVX-512 VNNI and AVX2, with or without AVX-VNNI; q8_0 / q4_0 / q4_1 /
// q4_k / q6_k on ARM with dotprod), else 32.
int64_t IntegerMatmulMaxRows(DType weight_type);

// Which kernel the active CPU target runs for `weight_type`'s matmul steps of
// up to IntegerMatmulMaxRows rows (decode): "int8-x86" (the register-blocked
// AVX2 / AVX-VNNI / AVX-512 VNNI kernels), "int8-arm-dot" (sdot / smmla),
// "int8-vnni" (per-chunk vpdpbusd), "int16" (the portable integer kernels:
// weights unpacked to int16 per chunk), "f32-widened" (f16 / bf16) or
// "dequant-f32" (no integer kernel: rows dequantised, then f32). Larger steps
// run "dequant-f32" where IntegerMatmulMaxRows is finite.
const char* DecodeMatmulKernel(DType weight_type);

// Bytes of the activation buffer for `t` rows of `k` values; the caller allocates
// it once (the hot path allocates nothing). k must be a whole number of weight
// blocks (32, or 256 for the k-quants).
size_t QuantizedActivationBytes(DType weight_type, int64_t t, int64_t k);

// Quantises x (f32 [t, k], rows contiguous) into `buffer` (at least
// QuantizedActivationBytes, 64-byte aligned recommended).
void QuantizeActivations(DType weight_type, const float* x, int64_t t, int64_t k, void* buffer);

// Rows [r0, r1) only, into the same t-row buffer: disjoint row ranges may run
// on different threads.
void QuantizeActivationRows(DType weight_type, const float* x, int64_t t, int64_t k, int64_t r0,
                            int64_t r1, void* buffer);

// The layout of a buffer written by QuantizeActivations (no copy).
QuantizedActivations ActivationView(DType weight_type, const void* buffer, int64_t t, int64_t k);

// Rows [n0, n1) of y for all t activation rows: y[r * ldy + n] = dot(x[r], W[n]),
// where weight row n starts at w + n * w_row_bytes and holds k values of
// `weight_type`. `qx` is the buffer from QuantizeActivations. Overwrites only
// those entries of y; disjoint row ranges may run on different threads.
void QuantMatmulRows(DType weight_type, const uint8_t* w, size_t w_row_bytes, const void* qx,
                     int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy);

// True where this machine has kernels for `weight_type` stored as panels
// (panel_layout.h): q8_0 / q4_0 / q4_1 on x86 AVX-512 VNNI and AVX2.
bool HasPanelKernels(DType weight_type);

// QuantMatmulRows for a weight matrix stored as panels at `panels` (PackPanels
// of all its rows; w_row_bytes as in the file); n0 and n1 multiples of 8. The
// results equal QuantMatmulRows' on the file layout bit for bit.
void PanelMatmulRows(DType weight_type, const uint8_t* panels, size_t w_row_bytes, const void* qx,
                     int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy);

}  // namespace anymoe::kernels
