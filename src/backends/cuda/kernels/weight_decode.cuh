// Weight decoding in the GGUF block layouts (and FP8), one element at a time:
// what every CUDA kernel that reads a weight calls. The same source compiles for
// the device under nvcc and as plain inline C++ under the host compiler, so that
// tests/backends/cuda_weight_decode_test.cc runs it on the CPU against
// DequantizeRow bit for bit on every machine, GPU or not. Products and sums that
// must round exactly as the CPU dequantisers' go through MulRn / AddRn / SubRn
// (__fmul_rn and kin on the device, which nvcc never contracts into an fma; the
// host build has -ffp-contract=off).
#pragma once

#include <cstdint>

#include "backends/cuda/kernels/decode_qualifiers.h"
#include "backends/cuda/kernels/iq_grids.cuh"
#include "backends/cuda/kernels/weight_types.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#else
#include <bit>
#include <cstring>

#include "core/half.h"
#endif

namespace anymoe::cuda::kernels {

#ifdef __CUDACC__
ANYMOE_DECODE float MulRn(float a, float b) { return __fmul_rn(a, b); }
ANYMOE_DECODE float AddRn(float a, float b) { return __fadd_rn(a, b); }
ANYMOE_DECODE float SubRn(float a, float b) { return __fsub_rn(a, b); }
ANYMOE_DECODE int PopCount(uint32_t v) { return __popc(v); }
ANYMOE_DECODE float FloatOfBits(uint32_t bits) { return __uint_as_float(bits); }
ANYMOE_DECODE float HalfOfBits(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}
// Loads at their natural alignment (the 2-byte block starts, f32 rows).
ANYMOE_DECODE uint32_t Aligned16At(const char* p) { return *reinterpret_cast<const uint16_t*>(p); }
ANYMOE_DECODE float F32At(const char* p) { return *reinterpret_cast<const float*>(p); }
#else
ANYMOE_DECODE float MulRn(float a, float b) { return a * b; }
ANYMOE_DECODE float AddRn(float a, float b) { return a + b; }
ANYMOE_DECODE float SubRn(float a, float b) { return a - b; }
ANYMOE_DECODE int PopCount(uint32_t v) { return std::popcount(v); }
ANYMOE_DECODE float FloatOfBits(uint32_t bits) { return std::bit_cast<float>(bits); }
ANYMOE_DECODE float HalfOfBits(uint32_t bits) { return F16ToF32(static_cast<uint16_t>(bits)); }
ANYMOE_DECODE uint32_t Aligned16At(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
ANYMOE_DECODE float F32At(const char* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
#endif

ANYMOE_DECODE float HalfAt(const char* p) { return HalfOfBits(Aligned16At(p)); }

ANYMOE_DECODE float Bf16At(const char* p) {  // the top half of an f32
  return FloatOfBits(Aligned16At(p) << 16);
}

// The 16 levels of IQ4_NL / IQ4_XS (core/iquant_blocks.cc).
ANYMOE_DECODE_TABLE int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

ANYMOE_DECODE uint32_t U16At(const uint8_t* p) {  // any alignment
  return uint32_t(p[0]) | uint32_t(p[1]) << 8;
}

// The 8 signs of a group from a 7-bit pattern: the eighth makes the number of
// negative values even (IQ2_XXS / IQ2_XS / IQ3_XXS).
ANYMOE_DECODE uint32_t EvenSigns(uint32_t pattern7) {
  return pattern7 | uint32_t(PopCount(pattern7) & 1) << 7;
}

// IQ1 value j of a codebook row: dl * (value + delta), value in {-1, 0, 1}.
ANYMOE_DECODE float Iq1Value(float dl, float delta, uint64_t row, int j) {
  return MulRn(dl, AddRn(float(int8_t(uint8_t(row >> (8 * j)))), delta));
}

// MXFP4's e2m1 values, doubled so that they are integers (the scale is halved).
ANYMOE_DECODE_TABLE int8_t kE2M1Doubled[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                               0, -1, -2, -3, -4, -6, -8, -12};

ANYMOE_DECODE uint32_t U32At(const uint8_t* p) {  // any alignment
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

ANYMOE_DECODE float HalfAtU(const uint8_t* p) {  // 2-byte aligned, as every block is
  return HalfAt(reinterpret_cast<const char*>(p));
}

// Value i of a q5_0 / q5_1 block: nibble i % 16 of qs, fifth bit i of qh.
ANYMOE_DECODE int Q5Value(const uint8_t* qs, uint32_t qh, int i) {
  const int nibble = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
  return nibble | int((qh >> i) & 1) << 4;
}

// Element e (of 256) of a k-quant / 256-element i-quant super-block, with the
// CPU dequantisers' operations in their order (core/quant_blocks.cc,
// core/iquant_blocks.cc; the OpenCL kernels' super_block_at is the same).
ANYMOE_DECODE float SuperBlockAt(const uint8_t* b, int dtype, int e) {
  switch (dtype) {
    case kQ2_K: {
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const float dl = MulRn(HalfAtU(b + 80), float(b[e / 16] & 15));
      const float ml = MulRn(HalfAtU(b + 82), float(b[e / 16] >> 4));
      return SubRn(MulRn(dl, float((b[16 + 32 * h + l] >> (2 * s)) & 3)), ml);
    }
    case kQ3_K: {
      const uint8_t* sc = b + 96;
      const int j = e / 16;
      const int low = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
      const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
      const float dl = MulRn(HalfAtU(b + 108), float(int(int8_t(low | high << 4)) - 32));
      const int h = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q2 = (b[32 + 32 * h + l] >> (2 * s)) & 3;
      const int hbit = (b[e % 32] >> (e / 32)) & 1;
      return MulRn(dl, float(q2 - ((hbit ^ 1) << 2)));
    }
    case kQ4_K:
    case kQ5_K: {
      const int j = e / 32, l = e % 32;
      const uint8_t* s = b + 4;
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 2) & 48);
      const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 2) & 48);
      const float dl = MulRn(HalfAtU(b), float(sc));
      const float ml = MulRn(HalfAtU(b + 2), float(m));
      const uint8_t* qs = b + (dtype == kQ4_K ? 16 : 48);
      int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (dtype == kQ5_K) v |= ((b[16 + l] >> j) & 1) << 4;
      return SubRn(MulRn(dl, float(v)), ml);
    }
    case kQ6_K: {
      const int hb = e / 128, in_half = e % 128;
      const int lo = (b[64 * hb + in_half % 64] >> (4 * (in_half / 64))) & 15;
      const int hi = (b[128 + 32 * hb + in_half % 32] >> (2 * (in_half / 32))) & 3;
      const float dl = MulRn(HalfAtU(b + 208), float(int8_t(b[192 + e / 16])));
      return MulRn(dl, float((lo | (hi << 4)) - 32));
    }
    case kIQ4_XS: {
      const int ib = e / 32, i = e % 32;
      const uint32_t scales_h = uint32_t(b[2]) | uint32_t(b[3]) << 8;
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((scales_h >> (2 * ib)) & 3) << 4;
      const float dl = MulRn(HalfAtU(b), float(ls - 32));
      const uint8_t* qs = b + 8 + 16 * ib;
      return MulRn(dl, float(kIq4Levels[i < 16 ? qs[i] & 15 : qs[i - 16] >> 4]));
    }
    case kIQ2_XXS: {
      const uint8_t* q = b + 2 + 8 * (e / 32);
      const uint32_t aux = U32At(q + 4);
      const float db = MulRn(MulRn(HalfAtU(b), AddRn(0.5f, float(aux >> 28))), 0.25f);
      const int l = (e % 32) / 8, jj = e % 8;
      const uint32_t signs = EvenSigns((aux >> (7 * l)) & 127);
      const float v = MulRn(db, float((kIq2xxsGrid[q[l]] >> (8 * jj)) & 255));
      return (signs >> jj) & 1 ? -v : v;
    }
    case kIQ2_XS: {
      const int g = e / 8, jj = e % 8;
      const uint32_t q = U16At(b + 2 + 2 * g);
      const int s = (b[66 + g / 4] >> (4 * ((g / 2) % 2))) & 15;
      const float db = MulRn(MulRn(HalfAtU(b), AddRn(0.5f, float(s))), 0.25f);
      const float v = MulRn(db, float((kIq2xsGrid[q & 511] >> (8 * jj)) & 255));
      return (EvenSigns(q >> 9) >> jj) & 1 ? -v : v;
    }
    case kIQ2_S: {
      const int g = e / 8, jj = e % 8;
      const uint32_t index = b[2 + g] | ((b[66 + g / 4] >> (2 * (g % 4))) & 3) << 8;
      const int s = (b[74 + g / 4] >> (4 * ((g / 2) % 2))) & 15;
      const float db = MulRn(MulRn(HalfAtU(b), AddRn(0.5f, float(s))), 0.25f);
      const float v = MulRn(db, float((kIq2sGrid[index] >> (8 * jj)) & 255));
      return (b[34 + g] >> jj) & 1 ? -v : v;
    }
    case kIQ3_XXS: {
      const int ib = e / 32, l = (e % 32) / 8, jj = e % 8;
      const uint32_t aux = U32At(b + 66 + 4 * ib);
      const float db = MulRn(MulRn(HalfAtU(b), AddRn(0.5f, float(aux >> 28))), 0.5f);
      const uint32_t row = kIq3xxsGrid[b[2 + 8 * ib + 2 * l + jj / 4]];
      const float v = MulRn(db, float((row >> (8 * (jj % 4))) & 255));
      return (EvenSigns((aux >> (7 * l)) & 127) >> jj) & 1 ? -v : v;
    }
    case kIQ3_S: {
      const int ib = e / 32, l = (e % 32) / 8, jj = e % 8;
      const int s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
      const float db = MulRn(HalfAtU(b), float(1 + 2 * s));
      const int k = 8 * ib + 2 * l + jj / 4;
      const uint32_t row = kIq3sGrid[b[2 + k] | ((b[66 + k / 8] >> (k % 8)) & 1) << 8];
      const float v = MulRn(db, float((row >> (8 * (jj % 4))) & 255));
      return (b[74 + 4 * ib + l] >> jj) & 1 ? -v : v;
    }
    case kIQ1_S: {
      const int ib = e / 32, l = (e % 32) / 8;
      const uint32_t h = U16At(b + 34 + 2 * ib);
      const float dl = MulRn(HalfAtU(b), float(2 * ((h >> 12) & 7) + 1));
      const float delta = h & 0x8000 ? -0.125f : 0.125f;
      return Iq1Value(dl, delta, kIq1sGrid[b[2 + 4 * ib + l] | ((h >> (3 * l)) & 7) << 8], e % 8);
    }
    case kIQ1_M: {
      const int g = e / 8;
      const uint32_t s0 = U16At(b + 48), s1 = U16At(b + 50), s2 = U16At(b + 52), s3 = U16At(b + 54);
      const uint16_t d_bits =
          uint16_t((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000));
      const float d = HalfOfBits(d_bits);
      const uint32_t sc = U16At(b + 48 + 2 * (g / 8));
      const float dl = MulRn(d, float(2 * ((sc >> (3 * ((g / 2) % 4))) & 7) + 1));
      const int nibble = (b[32 + g / 2] >> (4 * (g % 2))) & 15;
      const float delta = nibble & 8 ? -0.125f : 0.125f;
      return Iq1Value(dl, delta, kIq1sGrid[b[g] | (nibble & 7) << 8], e % 8);
    }
  }
  return FloatOfBits(0x7fc00000);
}

// Bytes of one super-block (256 weights) of the types SuperBlockAt decodes.
ANYMOE_DECODE int SuperBlockBytes(int dtype) {
  switch (dtype) {
    case kQ2_K:
      return 84;
    case kQ3_K:
      return 110;
    case kQ4_K:
      return 144;
    case kQ5_K:
      return 176;
    case kQ6_K:
      return 210;
    case kIQ1_S:
      return 50;
    case kIQ1_M:
      return 56;
    case kIQ2_XXS:
      return 66;
    case kIQ2_XS:
      return 74;
    case kIQ2_S:
      return 82;
    case kIQ3_XXS:
      return 98;
    case kIQ3_S:
      return 110;
    case kIQ4_XS:
      return 136;
  }
  return 0;
}

// FP8 values as core/dtype.cc's F8E4M3ToF32 / F8E5M2ToF32 build them (exact).
ANYMOE_DECODE float F8E4M3(uint8_t v) {
  const uint32_t sign = uint32_t(v >> 7) << 31, e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return FloatOfBits(sign | 0x7fc00000u);  // the NaN
  const float mag = e == 0 ? MulRn(float(m), 0x1p-9f) : FloatOfBits((e + 120) << 23 | m << 20);
  return sign ? -mag : mag;
}

ANYMOE_DECODE float F8E5M2(uint8_t v) {  // the top byte of an f16
  const uint32_t sign = uint32_t(v >> 7) << 31, e = (v >> 2) & 31, m = v & 3;
  if (e == 31) return FloatOfBits(sign | 0x7f800000u | m << 21);  // inf, NaN
  const float mag = e == 0 ? MulRn(float(m), 0x1p-16f) : FloatOfBits((e + 112) << 23 | m << 21);
  return sign ? -mag : mag;
}

// Element j of a weight row of the given dtype.
ANYMOE_DECODE float WeightAt(const char* row, int dtype, int j) {
  const uint8_t* u = reinterpret_cast<const uint8_t*>(row);
  switch (dtype) {
    case kQ2_K:
    case kQ3_K:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K:
    case kIQ1_S:
    case kIQ1_M:
    case kIQ2_XXS:
    case kIQ2_XS:
    case kIQ2_S:
    case kIQ3_XXS:
    case kIQ3_S:
    case kIQ4_XS:
      return SuperBlockAt(u + SuperBlockBytes(dtype) * (j / 256), dtype, j % 256);
    case kMXFP4: {  // scale 2^(e - 127) halved, built from its bits; e2m1 nibbles
      const uint8_t* b = u + 17 * (j / 32);
      const uint32_t e = b[0];
      const float d = FloatOfBits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
      const int i = j % 32;
      return MulRn(d, float(kE2M1Doubled[i < 16 ? b[1 + i] & 15 : b[1 + i - 16] >> 4]));
    }
    case kQ5_0: {
      const uint8_t* b = u + 22 * (j / 32);
      return MulRn(HalfAtU(b), float(Q5Value(b + 6, U32At(b + 2), j % 32) - 16));
    }
    case kQ5_1: {
      const uint8_t* b = u + 24 * (j / 32);
      return AddRn(MulRn(HalfAtU(b), float(Q5Value(b + 8, U32At(b + 4), j % 32))), HalfAtU(b + 2));
    }
    case kIQ4_NL: {
      const uint8_t* b = u + 18 * (j / 32);
      const int i = j % 32;
      return MulRn(HalfAtU(b), float(kIq4Levels[i < 16 ? b[2 + i] & 15 : b[2 + i - 16] >> 4]));
    }
    case kF8_E4M3:
      return F8E4M3(u[j]);  // before its block scale
    case kF8_E5M2:
      return F8E5M2(u[j]);
    case kF32:
      return F32At(row + 4 * j);
    case kF16:
      return HalfAt(row + 2 * j);
    case kBF16:
      return Bf16At(row + 2 * j);
    case kQ8_0: {
      const char* b = row + 34 * (j / 32);
      return MulRn(HalfAt(b), float(static_cast<int8_t>(b[2 + j % 32])));
    }
    case kQ4_0: {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(row + 18 * (j / 32));
      const int i = j % 32;
      const int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
      return MulRn(HalfAtU(b), float(q - 8));
    }
    case kQ4_1: {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(row + 20 * (j / 32));
      const int i = j % 32;
      const int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
      return AddRn(MulRn(HalfAtU(b), float(q)), HalfAtU(b + 2));
    }
  }
  return FloatOfBits(0x7fc00000);  // NaN: an unsupported dtype reached a kernel
}

}  // namespace anymoe::cuda::kernels
