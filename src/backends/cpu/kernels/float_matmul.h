// f32-activation matmul against f32, f16 or bf16 weight rows, the CPU's path
// for every product that keeps activations in f32 (f32 / f16 / bf16 weights,
// `--exact`, dequantised tiles of quantised weights, MLA's per-head products).
// It exists so that those products are batch-invariant on every machine: a
// BLAS library picks its kernels from the CPU model and the matrix shape (one
// row goes to gemv, small edges to other micro-kernels), so a row's result
// moved with the batch it came in on some CPUs (OpenBLAS 0.3.21's Haswell/Zen
// kernels: Zen 5 machines), while here each output's summation order is fixed
// by k alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace anymoe::kernels {

// y[r * ldy + n] = sum_i x[r * ldx + i] * W[n][i] for r < t and n in [n0, n1),
// where weight row n starts at w + n * w_row_bytes and holds k values of
// `weight_type` (f32, f16 or bf16). Each output is summed lane-parallel in k
// order over whole vectors, reduced in a fixed order, then the k % lanes tail
// is added element by element: the result depends on x's row, W's row and the
// SIMD target only, never on t, n0, n1 or how callers tile and thread the
// product. Overwrites only those entries of y; disjoint [n0, n1) ranges may run
// on different threads.
void FloatMatmulRows(DType weight_type, const uint8_t* w, size_t w_row_bytes, const float* x,
                     int64_t ldx, int64_t t, int64_t k, int64_t n0, int64_t n1, float* y,
                     int64_t ldy);

}  // namespace anymoe::kernels
