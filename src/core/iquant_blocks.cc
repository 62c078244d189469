// Scalar dequantisers of the GGUF i-quants (codebook IQ1/IQ2/IQ3, non-linear
// IQ4) and of MXFP4; see dequant_blocks.h for the rounding contract. The
// codebooks are in iq_grids.cc; the other constants below are the published
// format definitions (ggml's, as gguf-py documents them).
#include <bit>

#include "core/dequant_blocks.h"
#include "core/iq_grids.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace anymoe::dequant {
namespace {

// The 16 levels of IQ4_NL / IQ4_XS: a non-uniform 4-bit code.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4's e2m1 values, doubled so that they are integers (the scale is halved).
constexpr int8_t kE2M1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// IQ1's shift of every codebook value, negated by a flag per group.
constexpr float kIq1Delta = 0.125f;

// The 8 signs of a group from a 7-bit pattern: the eighth sign makes the
// number of negative values even (the IQ2_XXS/XS and IQ3_XXS "ksigns").
inline uint8_t EvenSigns(uint32_t pattern7) {
  return uint8_t(pattern7 | uint32_t(std::popcount(pattern7) & 1) << 7);
}

// Byte j of a packed codebook row.
inline int GridValue(uint64_t row, int j) { return int(uint8_t(row >> (8 * j))); }
inline int SignedGridValue(uint64_t row, int j) { return int(int8_t(uint8_t(row >> (8 * j)))); }

// out[j] = (db * grid[j]) * sign_j for a group of 8 with sign bits `signs`.
inline void Group8(float db, uint64_t row, uint8_t signs, float* out) {
  for (int j = 0; j < 8; ++j) {
    const float v = db * float(GridValue(row, j));
    out[j] = (signs >> j) & 1 ? -v : v;
  }
}

// A group of 8 from two 4-value IQ3 codebook rows.
inline void Group4x2(float db, uint32_t row0, uint32_t row1, uint8_t signs, float* out) {
  Group8(db, uint64_t(row0) | uint64_t(row1) << 32, signs, out);
}

// IQ1 group: dl * (value + delta) with value in {-1, 0, 1}.
inline void Iq1Group(float dl, float delta, uint64_t row, float* out) {
  for (int j = 0; j < 8; ++j) out[j] = dl * (float(SignedGridValue(row, j)) + delta);
}

// 32 non-linear 4-bit values: low nibbles are elements 0..15, high 16..31.
inline void Levels32(float d, const uint8_t* qs, const int8_t* levels, float* out) {
  for (int i = 0; i < 16; ++i) {
    out[i] = d * float(levels[qs[i] & 0x0f]);
    out[i + 16] = d * float(levels[qs[i] >> 4]);
  }
}

}  // namespace

// f16 d; 8 x (u32 codebook bytes, u32 of 4 7-bit sign patterns + 4-bit scale).
void IQ2_XXS(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* q = block + 2 + 8 * ib;
    const uint32_t aux = LoadU32(q + 4);
    const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      Group8(db, kIq2xxsGrid[q[l]], EvenSigns((aux >> (7 * l)) & 127), out + 32 * ib + 8 * l);
    }
  }
}

// f16 d; 32 u16 (9-bit codebook index, 7-bit sign pattern); 4-bit scale per 16.
void IQ2_XS(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t* scales = block + 66;
  for (int g = 0; g < 32; ++g) {
    const uint16_t q = LoadU16(block + 2 + 2 * g);
    const int s = (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0f;
    const float db = d * (0.5f + float(s)) * 0.25f;
    Group8(db, kIq2xsGrid[q & 511], EvenSigns(q >> 9), out + 8 * g);
  }
}

// f16 d; 32 low index bytes; 32 sign bytes; 8 bytes of 2 high index bits per
// group; 4-bit scale per 16.
void IQ2_S(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t *qs = block + 2, *signs = block + 34, *qh = block + 66, *scales = block + 74;
  for (int g = 0; g < 32; ++g) {
    const int index = qs[g] | ((qh[g / 4] >> (2 * (g % 4))) & 3) << 8;
    const int s = (scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0f;
    const float db = d * (0.5f + float(s)) * 0.25f;
    Group8(db, kIq2sGrid[index], signs[g], out + 8 * g);
  }
}

// f16 d; 64 codebook bytes (4 values each); 8 u32 of 4 7-bit sign patterns +
// 4-bit scale, one per 32 values.
void IQ3_XXS(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t* qs = block + 2;
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = LoadU32(block + 66 + 4 * ib);
    const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t* q = qs + 8 * ib + 2 * l;
      Group4x2(db, kIq3xxsGrid[q[0]], kIq3xxsGrid[q[1]], EvenSigns((aux >> (7 * l)) & 127),
               out + 32 * ib + 8 * l);
    }
  }
}

// f16 d; 64 low index bytes; 8 bytes of high index bits (bit k % 8 of byte
// k / 8 for index k); 32 sign bytes; 4-bit scales (d * (1 + 2s)) per 32.
void IQ3_S(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t *qs = block + 2, *qh = block + 66, *signs = block + 74, *scales = block + 106;
  auto index = [&](int k) { return qs[k] | ((qh[k / 8] >> (k % 8)) & 1) << 8; };
  for (int ib = 0; ib < 8; ++ib) {
    const int s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
    const float db = d * float(1 + 2 * s);
    for (int l = 0; l < 4; ++l) {
      const int k = 8 * ib + 2 * l;
      Group4x2(db, kIq3sGrid[index(k)], kIq3sGrid[index(k + 1)], signs[4 * ib + l],
               out + 32 * ib + 8 * l);
    }
  }
}

// f16 d; 32 low index bytes; 8 u16 with, per 32 values, 4 x 3 high index bits,
// a 3-bit scale (d * (2s + 1)) and the delta's sign in the top bit.
void IQ1_S(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t* qs = block + 2;
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t h = LoadU16(block + 34 + 2 * ib);
    const float dl = d * float(2 * ((h >> 12) & 7) + 1);
    const float delta = h & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const int index = qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8;
      Iq1Group(dl, delta, kIq1sGrid[index], out + 32 * ib + 8 * l);
    }
  }
}

// 32 low index bytes; 16 bytes of nibbles (3 high index bits + delta sign per
// group of 8); 4 u16 holding 3-bit scales (d * (2s + 1)) per 16 values in
// their low 12 bits and the f16 d in their top nibbles.
void IQ1_M(const uint8_t* block, float* out) {
  const uint8_t *qs = block, *qh = block + 32;
  uint16_t sc[4];
  for (int i = 0; i < 4; ++i) sc[i] = LoadU16(block + 48 + 2 * i);
  const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                   ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
  const float d = F16ToF32(d_bits);
  for (int g = 0; g < 32; ++g) {
    const int s = (sc[g / 8] >> (3 * ((g / 2) % 4))) & 7;
    const float dl = d * float(2 * s + 1);
    const int nibble = (qh[g / 2] >> (4 * (g % 2))) & 0x0f;
    const float delta = nibble & 8 ? -kIq1Delta : kIq1Delta;
    Iq1Group(dl, delta, kIq1sGrid[qs[g] | (nibble & 7) << 8], out + 8 * g);
  }
}

// f16 d; 16 bytes of non-linear nibbles.
void IQ4_NL(const uint8_t* block, float* out) { Levels32(LoadF16(block), block + 2, kIq4Levels, out); }

// f16 d; u16 of 2 high scale bits per 32; 4 bytes of low scale nibbles; 128
// bytes of non-linear nibbles (16 per 32 values). Scales are offset by 32.
void IQ4_XS(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint16_t scales_h = LoadU16(block + 2);
  const uint8_t* scales_l = block + 4;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | ((scales_h >> (2 * ib)) & 3) << 4;
    Levels32(d * float(ls - 32), block + 8 + 16 * ib, kIq4Levels, out + 32 * ib);
  }
}

// e8m0 exponent byte e: the scale is 2^(e - 127), halved to undo the doubled
// e2m1 values (built from its bits as ggml_e8m0_to_fp32_half does, subnormal
// for e < 2); then 16 bytes of e2m1 nibbles.
void MXFP4(const uint8_t* block, float* out) {
  const uint32_t e = block[0];
  const uint32_t bits = e < 2 ? uint32_t(0x00200000) << e : (e - 1) << 23;
  Levels32(std::bit_cast<float>(bits), block + 1, kE2M1Doubled, out);
}

}  // namespace anymoe::dequant
