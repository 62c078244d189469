// Scalar dequantisers of one GGUF block each, the reference the SIMD kernels
// are tested against. They follow the block layouts of ggml as gguf-py's numpy
// code documents them and round exactly as that code does: one f32 rounding per
// numpy operation, in its order, and never a fused multiply-add (the .cc files
// turn contraction off). Internal to core/: callers use DequantizeRow.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"

namespace anymoe::dequant {

// Unaligned little-endian loads: mmap'd blocks carry no alignment promise.
inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}
inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Writes the block's elements (32 or 256) to `out`; `block` has no alignment.
using BlockFn = void (*)(const uint8_t* block, float* out);

// Legacy and k-quant layouts (quant_blocks.cc).
void Q8_0(const uint8_t* block, float* out);
void Q4_0(const uint8_t* block, float* out);
void Q4_1(const uint8_t* block, float* out);
void Q5_0(const uint8_t* block, float* out);
void Q5_1(const uint8_t* block, float* out);
void Q2_K(const uint8_t* block, float* out);
void Q3_K(const uint8_t* block, float* out);
void Q4_K(const uint8_t* block, float* out);
void Q5_K(const uint8_t* block, float* out);
void Q6_K(const uint8_t* block, float* out);

// Codebook and non-linear layouts (iquant_blocks.cc).
void IQ1_S(const uint8_t* block, float* out);
void IQ1_M(const uint8_t* block, float* out);
void IQ2_XXS(const uint8_t* block, float* out);
void IQ2_XS(const uint8_t* block, float* out);
void IQ2_S(const uint8_t* block, float* out);
void IQ3_XXS(const uint8_t* block, float* out);
void IQ3_S(const uint8_t* block, float* out);
void IQ4_XS(const uint8_t* block, float* out);
void IQ4_NL(const uint8_t* block, float* out);
void MXFP4(const uint8_t* block, float* out);

}  // namespace anymoe::dequant
