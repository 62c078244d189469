// Scalar dequantisers of the legacy (q8_0, q4_0/1, q5_0/1) and k-quant (q2_k ...
// q6_k) GGUF blocks; see dequant_blocks.h for the rounding contract.
#include "core/dequant_blocks.h"

// numpy never fuses a*b+c; neither may we, or results differ in the last bit.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace anymoe::dequant {
namespace {

constexpr int kQK = 32;    // elements per block of q8_0 / q4_* / q5_*
constexpr int kQKK = 256;  // elements per super-block of the k-quants

// The 12 scale bytes of q4_k / q5_k pack eight 6-bit scales and eight 6-bit mins:
// bytes 0..3 / 4..7 hold the low 6 bits of scales / mins 0..3 (their top 2 bits are
// the high bits of scales / mins 4..7), bytes 8..11 hold the low 4 bits of
// scales 4..7 (low nibble) and mins 4..7 (high nibble).
void UnpackKScales(const uint8_t* s, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = s[j] & 0x3f;
    min[j] = s[j + 4] & 0x3f;
    scale[j + 4] = uint8_t((s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30));
    min[j + 4] = uint8_t((s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30));
  }
}

// Value i of a q5_0 / q5_1 block: nibble i % 16 of qs (low for i < 16), fifth
// bit i of the little-endian word qh.
inline int Q5Value(const uint8_t* qs, uint32_t qh, int i) {
  const int nibble = i < kQK / 2 ? qs[i] & 0x0f : qs[i - kQK / 2] >> 4;
  return nibble | int((qh >> i) & 1) << 4;
}

}  // namespace

void Q8_0(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
  for (int i = 0; i < kQK; ++i) out[i] = float(qs[i]) * d;
}

// Low nibbles hold elements 0..15, high nibbles 16..31.
void Q4_0(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t* qs = block + 2;
  for (int i = 0; i < kQK / 2; ++i) {
    out[i] = d * float(int(qs[i] & 0x0f) - 8);
    out[i + kQK / 2] = d * float(int(qs[i] >> 4) - 8);
  }
}

void Q4_1(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float m = LoadF16(block + 2);
  const uint8_t* qs = block + 4;
  for (int i = 0; i < kQK / 2; ++i) {
    out[i] = d * float(qs[i] & 0x0f) + m;
    out[i + kQK / 2] = d * float(qs[i] >> 4) + m;
  }
}

// f16 d, u32 high bits, 16 bytes of nibbles; values offset by 16.
void Q5_0(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint32_t qh = LoadU32(block + 2);
  for (int i = 0; i < kQK; ++i) out[i] = d * float(Q5Value(block + 6, qh, i) - 16);
}

// f16 d, f16 min, u32 high bits, 16 bytes of nibbles.
void Q5_1(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float m = LoadF16(block + 2);
  const uint32_t qh = LoadU32(block + 4);
  for (int i = 0; i < kQK; ++i) out[i] = d * float(Q5Value(block + 8, qh, i)) + m;
}

// Super-block: 16 scale bytes (low nibble scale, high nibble min, one per 16
// values), 64 bytes of 2-bit values, f16 d, f16 dmin. Value 128*h + 32*s + l
// is bits 2s..2s+1 of qs[32*h + l].
void Q2_K(const uint8_t* block, float* out) {
  const uint8_t* scales = block;
  const uint8_t* qs = block + 16;
  const float d = LoadF16(block + 80);
  const float dmin = LoadF16(block + 82);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e % 128) / 32, l = e % 32;
    const float dl = d * float(scales[e / 16] & 0x0f);
    const float ml = dmin * float(scales[e / 16] >> 4);
    out[e] = dl * float((qs[32 * h + l] >> (2 * s)) & 3) - ml;
  }
}

// Super-block: 32 bytes of high bits (bit b of hmask[l] belongs to value
// 32*b + l; a clear bit subtracts 4), 64 bytes of 2-bit values laid out as in
// q2_k, 12 bytes packing 16 6-bit scales (low nibbles in bytes 0..7, two high
// bits each in bytes 8..11), f16 d. Scales are offset by 32.
void Q3_K(const uint8_t* block, float* out) {
  const uint8_t* hmask = block;
  const uint8_t* qs = block + 32;
  const uint8_t* sc = block + 96;
  const float d = LoadF16(block + 108);
  for (int e = 0; e < kQKK; ++e) {
    const int j = e / 16;
    const int low = j < 8 ? sc[j] & 0x0f : sc[j - 8] >> 4;
    const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    const float dl = d * float(int8_t(low | high << 4) - 32);
    const int h = e / 128, s = (e % 128) / 32, l = e % 32;
    const int q2 = (qs[32 * h + l] >> (2 * s)) & 3;
    const int hbit = (hmask[e % 32] >> (e / 32)) & 1;
    out[e] = dl * float(q2 - ((hbit ^ 1) << 2));
  }
}

// Super-block: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Sub-block j
// (32 values) uses byte group j/2, low nibbles for even j and high for odd j.
void Q4_K(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float dmin = LoadF16(block + 2);
  uint8_t scale[8], min[8];
  UnpackKScales(block + 4, scale, min);
  const uint8_t* qs = block + 16;
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(scale[j]);
    const float ml = dmin * float(min[j]);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) out[32 * j + l] = dl * float((q[l] >> shift) & 0x0f) - ml;
  }
}

// Like q4_k, with 32 bytes of high bits after the scales: bit j of qh[l] is the
// fifth bit of value l of sub-block j.
void Q5_K(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float dmin = LoadF16(block + 2);
  uint8_t scale[8], min[8];
  UnpackKScales(block + 4, scale, min);
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(scale[j]);
    const float ml = dmin * float(min[j]);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
      out[32 * j + l] = dl * float(v) - ml;
    }
  }
}

// Super-block: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales
// (one per 16 values), f16 d. Each half (128 values) uses 64 low bytes and 32 high
// bytes: value 64*h + k of the half takes nibble h of ql[k], and value 32*s + k
// takes bits 2s..2s+1 of qh[k].
void Q6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = LoadF16(block + 208);
  for (int e = 0; e < kQKK; ++e) {
    const int half = e / 128, in_half = e % 128;
    const int lo = (ql[64 * half + in_half % 64] >> (4 * (in_half / 64))) & 0x0f;
    const int hi = (qh[32 * half + in_half % 32] >> (2 * (in_half / 32))) & 0x03;
    const float dl = d * float(scales[e / 16]);
    out[e] = dl * float((lo | (hi << 4)) - 32);
  }
}

}  // namespace anymoe::dequant
