// Weight and activation element types, with the block layout of each quantised
// format. Quantised formats are stored exactly as GGUF defines them, so a GGUF
// tensor is used in place from the mmap with no conversion. FP8 (safetensors
// F8_E4M3 / F8_E5M2) is stored per element; its block scales travel beside it
// (Tensor::block_scales).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace anymoe {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,  // blocks of 32: f16 scale + 32 x int8
  kQ4_0,  // blocks of 32: f16 scale + 16 bytes of 4-bit values, offset 8
  kQ4_1,  // blocks of 32: f16 scale + f16 min + 16 bytes of 4-bit values
  kQ4_K,  // super-blocks of 256: 8 sub-blocks with 6-bit scales/mins
  kQ5_K,  // super-blocks of 256: like q4_k plus one high bit per value
  kQ6_K,  // super-blocks of 256: 16 sub-blocks with int8 scales
  kI32,   // metadata-like tensors only (never a matmul operand)
  // Values above are fixed: device kernels receive a DType as an int. New types
  // go at the end.
  kQ2_K,     // super-blocks of 256: 16 x (4-bit scale, 4-bit min), 2-bit values
  kQ3_K,     // super-blocks of 256: 16 6-bit scales, 2 low bits + 1 high bit
  kQ5_0,     // blocks of 32: f16 scale, 32 high bits, 16 bytes of nibbles, offset 16
  kQ5_1,     // blocks of 32: f16 scale + f16 min, 32 high bits, 16 bytes of nibbles
  kIQ1_S,    // super-blocks of 256: groups of 8 from a {-1,0,1} codebook + delta
  kIQ1_M,    // like iq1_s with 3-bit scales per 16 and the f16 scale split up
  kIQ2_XXS,  // super-blocks of 256: 8-value codebook (256) + 7-bit sign patterns
  kIQ2_XS,   // codebook of 512, 4-bit scales per 16
  kIQ2_S,    // codebook of 1024, explicit sign bits
  kIQ3_XXS,  // 4-value codebook (256) + 7-bit sign patterns
  kIQ3_S,    // 4-value codebook (512), explicit sign bits
  kIQ4_XS,   // super-blocks of 256: 6-bit scales per 32, non-linear 4-bit values
  kIQ4_NL,   // blocks of 32: f16 scale, non-linear 4-bit values
  kMXFP4,    // blocks of 32: e8m0 shared exponent, 4-bit e2m1 values
  kF8_E4M3,  // 1 byte: sign, 4-bit exponent (bias 7), 3-bit mantissa, no inf
  kF8_E5M2,  // 1 byte: the top half of an f16
};
inline constexpr int kNumDTypes = static_cast<int>(DType::kF8_E5M2) + 1;

struct DTypeInfo {
  std::string_view name;  // "f32", "q4_k", ... as llama.cpp spells it
  int block_elems;        // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
  bool quantized;
};

const DTypeInfo& Info(DType t);
inline std::string_view Name(DType t) { return Info(t).name; }

// GGML type id (the value stored in a GGUF tensor info) to DType; nullopt if unsupported.
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
uint32_t GgmlTypeOf(DType t);  // CHECK-fails for FP8, which GGUF lacks

// Bytes used by `n` consecutive elements; an error if `n` is not a whole number
// of blocks or the byte count overflows.
Expected<uint64_t> BytesFor(DType t, uint64_t n);

// Converts `n` elements (a whole number of blocks) starting at `src` to f32.
// Bit-exact with the `gguf` Python package's numpy dequantisers, and for FP8
// with torch's float8 -> float32 conversion (unscaled: block scales are applied
// by DequantizeWeightRows in core/tensor.h).
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// One FP8 value to f32 (exact; NaN for the NaN encodings).
float F8E4M3ToF32(uint8_t v);
float F8E5M2ToF32(uint8_t v);

}  // namespace anymoe
