// The x86 integer kernel of iq2_xxs weights (the 2-bit experts of the low-bit
// GLM releases), for vnni::Tile. Each group of 8 weights is a byte indexing a
// 256-row codebook of magnitudes in {8, 25, 43} plus 7 sign bits: a table
// lookup per 8 values, so the cost is decoding, not bytes. On AVX3_DL (VBMI)
// a super-block's 32 indices turn into 2-bit level codes with vpermi2b, one
// vpmultishiftqb + vpermb expands two blocks' codes into their 64 magnitudes,
// and the sign bits become a mask that negates x; scales are computed once per
// super-block. AVX2 looks the grid rows up one by one. Both compute every
// output the same way (even and odd blocks in separate f32 accumulators, the
// same f32 steps per lane), so AVX2 gives AVX-512's bits.
//
// Per block b of 32 (super-block scale d, 4-bit block scale s) and activation row r:
//   acc[b % 2] += (float(dot(|w|, x with w's signs)) * dx[r][b]) * ((d (0.5 + s)) / 4)

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace iq2xxs {

constexpr size_t kSuperBytes = 66;  // f16 d, 8 x (4 index bytes, u32 signs + scale)

// The 8 signs of a group from its 7-bit pattern (the eighth makes the count
// of negatives even): bit j set where value j is negative.
constexpr uint8_t EvenSigns(uint32_t pattern7) {
  return uint8_t(pattern7 | uint32_t(std::popcount(pattern7) & 1) << 7);
}

// Lookup tables built from the codebook once (kIq2xxsGrid is not constexpr).
struct Tables {
  // Row e of the grid as 2-bit level codes (value j in bits 2j..2j+1: 8 -> 0,
  // 25 -> 1, 43 -> 2), low byte (values 0-3) and high byte (4-7).
  alignas(64) uint8_t code_low[256];
  alignas(64) uint8_t code_high[256];
  alignas(64) uint8_t signs[128];        // EvenSigns(p), for vpermi2b
  alignas(64) uint64_t sign_bytes[128];  // EvenSigns(p) as bytes +1 / -1, for vpsignb
  Tables() {
    for (int e = 0; e < 256; ++e) {
      uint32_t code = 0;
      for (int j = 0; j < 8; ++j) {
        const uint32_t v = uint32_t(kIq2xxsGrid[e] >> (8 * j)) & 0xff;
        code |= (v == 8 ? 0u : v == 25 ? 1u : 2u) << (2 * j);
      }
      code_low[e] = uint8_t(code);
      code_high[e] = uint8_t(code >> 8);
    }
    for (uint32_t p = 0; p < 128; ++p) {
      signs[p] = EvenSigns(p);
      uint64_t v = 0;
      for (int j = 0; j < 8; ++j) v |= uint64_t((signs[p] >> j) & 1 ? 0xff : 0x01) << (8 * j);
      sign_bytes[p] = v;
    }
  }
};

inline const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

// The 8 block scales of a super-block, lane j for block j: (d (0.5 + s_j)) / 4,
// the reference's rounding (the / 4 is exact).
HWY_INLINE __m256 BlockScales(float d, __m256 s) {
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_add_ps(s, _mm256_set1_ps(0.5f))),
                       _mm256_set1_ps(0.25f));
}

// Super-block sb of the group of NW rows after next, as vnni::Tile prefetches
// (four interleaved rows defeat the hardware prefetcher), not past rows_end.
template <int NW>
HWY_INLINE void PrefetchAhead(const uint8_t* w, size_t row_bytes, const uint8_t* rows_end,
                              int64_t sb) {
  if constexpr (NW > 1) {
    constexpr size_t kStepBytes = NW * kSuperBytes;
    constexpr int kLines = int((kStepBytes + 63) / 64) + 1;
    const uint8_t* ahead = w + 2 * NW * row_bytes + size_t(sb) * kStepBytes;
    for (int i = 0; i < kLines; ++i) {
      if (ahead + 64 * i < rows_end)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * i), _MM_HINT_T0);
    }
  }
}

#if HWY_TARGET == HWY_AVX3_DL

// All lanes: the masked forms of these instructions (with this mask, the plain
// ones) leave GCC 12 no undefined pass-through operand to warn about
// (-Wmaybe-uninitialized in its AVX-512 headers; as quant_matmul_gemm-inl.h).
constexpr __mmask8 kAll8 = 0xff;
constexpr __mmask16 kAll16 = 0xffff;
constexpr __mmask64 kAll64 = ~__mmask64(0);

// What one super-block of one weight row leaves for its 4 pairs of blocks.
struct Super {
  __m512i codes;      // qword j: the 4 groups' 16-bit level codes of block j
  __m512 scales;      // lanes 0-7: block scales
  uint64_t signs[4];  // pair p: sign bits of blocks 2p (low half) and 2p + 1
};

struct Decoder {
  __m512i low[4], high[4], sign_table[2];
  __m512i interleave;   // bytes 2m, 2m + 1: low, high code byte of group m
  __m512i sign_shifts;  // qword j, bytes 0-3: bit offsets of the 4 sign patterns
  HWY_INLINE Decoder() {
    const Tables& t = GetTables();
    for (int i = 0; i < 4; ++i) {
      low[i] = _mm512_load_si512(t.code_low + 64 * i);
      high[i] = _mm512_load_si512(t.code_high + 64 * i);
    }
    sign_table[0] = _mm512_load_si512(t.signs);
    sign_table[1] = _mm512_load_si512(t.signs + 64);
    alignas(64) uint8_t idx[64];
    for (int m = 0; m < 32; ++m) {
      idx[2 * m] = uint8_t(8 * (m / 4) + m % 4);
      idx[2 * m + 1] = uint8_t(64 + 8 * (m / 4) + m % 4);
    }
    interleave = _mm512_load_si512(idx);
    sign_shifts = _mm512_set1_epi64(int64_t(0x00000000352e2720));  // 32, 39, 46, 53
  }

  // The 64 bytes after d: index bytes at 8j..8j+3, sign/scale word at 8j+4.
  HWY_INLINE void Load(const uint8_t* super, Super* s) const {
    const __m512i data = _mm512_loadu_si512(super + 2);
    // A byte from a 256-entry table: the index's bit 7 picks the half.
    const __mmask64 upper = _mm512_movepi8_mask(data);
    const auto lookup = [&](const __m512i* table) HWY_ATTR {
      return _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(table[0], data, table[1]),
                                    _mm512_permutex2var_epi8(table[2], data, table[3]));
    };
    s->codes = _mm512_permutex2var_epi8(lookup(low), interleave, lookup(high));
    const __m512i patterns = _mm512_maskz_multishift_epi64_epi8(kAll64, sign_shifts, data);
    const __m512i signs = _mm512_permutex2var_epi8(sign_table[0], patterns, sign_table[1]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s->signs),
                        _mm512_maskz_cvtepi64_epi32(kAll8, signs));
    const __m256 block_scale =
        _mm512_maskz_cvtepi64_ps(kAll8, _mm512_maskz_srli_epi64(kAll8, data, 60));
    s->scales = _mm512_castps256_ps512(BlockScales(F16ToF32(LoadU16(super)), block_scale));
  }
};

// Per int32 lane: the 4 unsigned bytes of u times the 4 signed bytes of s
// (vpdpbusd spelt out: Highway's AVX3_DL attributes lack avx512vnni).
HWY_INLINE __m512i DotLanes512(__m512i u, __m512i s) {
  __m512i acc = _mm512_setzero_si512();
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
  return acc;
}

// Lanes 0-7 take lane 2p of v, lanes 8-15 lane 2p + 1.
HWY_INLINE __m512i PairLanes(int p) {
  return _mm512_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1,
                           2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                           2 * p + 1);
}

// The 64 magnitudes of blocks 2p and 2p + 1 from their codes.
HWY_INLINE __m512i PairMagnitudes(const Super& s, int p) {
  const __m512i qwords =
      _mm512_setr_epi64(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1);
  // Qword g % 4 of a block: bytes take bits 16 (g % 4) + 2i.. of the codes.
  const __m512i shifts =
      _mm512_set4_epi64(int64_t(0x3e3c3a3836343230), int64_t(0x2e2c2a2826242220),
                        int64_t(0x1e1c1a1816141210), int64_t(0x0e0c0a0806040200));
  const __m512i codes = _mm512_maskz_multishift_epi64_epi8(
      kAll64, shifts, _mm512_maskz_permutexvar_epi64(kAll8, qwords, s.codes));
  // vpermb reads the low 6 bits: a table whose byte i is level (i % 4).
  return _mm512_maskz_permutexvar_epi8(kAll64, codes, _mm512_set1_epi32(0x002b1908));
}

// y[r0 + r][n + j] for r < R activation rows, j < NW weight rows from w (see
// vnni::Tile; prefetching the same way).
template <int R, int NW>
HWY_INLINE void Tile(const uint8_t* w, const uint8_t* rows_end, size_t row_bytes,
                     const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  const Decoder decoder;
  const int64_t nb = x.k / 32;
  __m512 acc[R][NW];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
  const int8_t* xq = x.qs + r0 * x.k;
  const float* xd = x.d + r0 * nb;
  for (int64_t b = 0; b < nb; b += 8) {
    Super super[NW];
    for (int j = 0; j < NW; ++j)
      decoder.Load(w + size_t(j) * row_bytes + size_t(b / 8) * kSuperBytes, &super[j]);
    PrefetchAhead<NW>(w, row_bytes, rows_end, b / 8);
    __m512 dx8[R];
    for (int r = 0; r < R; ++r) dx8[r] = _mm512_castps256_ps512(_mm256_loadu_ps(xd + r * nb + b));
    for (int p = 0; p < 4; ++p) {
      const __m512i pair = PairLanes(p);
      __m512i xv[R];
      __m512 dx[R];
      for (int r = 0; r < R; ++r) {
        xv[r] = _mm512_loadu_si512(xq + r * x.k + 32 * (b + 2 * p));
        dx[r] = _mm512_maskz_permutexvar_ps(kAll16, pair, dx8[r]);
      }
      for (int j = 0; j < NW; ++j) {
        const __m512i u = PairMagnitudes(super[j], p);
        const __mmask64 negative = _cvtu64_mask64(super[j].signs[p]);
        const __m512 scale = _mm512_maskz_permutexvar_ps(kAll16, pair, super[j].scales);
        for (int r = 0; r < R; ++r) {
          const __m512i signed_x =
              _mm512_mask_sub_epi8(xv[r], negative, _mm512_setzero_si512(), xv[r]);
          const __m512i lanes = DotLanes512(u, signed_x);
          acc[r][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(kAll16, lanes), dx[r]),
                                      scale, acc[r][j]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NW; ++j) {
      y[r * ldy + j] =
          vnni::HorizontalSum(_mm256_add_ps(_mm512_maskz_extractf32x8_ps(kAll8, acc[r][j], 0),
                                            _mm512_maskz_extractf32x8_ps(kAll8, acc[r][j], 1)));
    }
  }
}

#else  // AVX2

// One block's magnitudes and +1 / -1 sign bytes, row by row from the tables.
HWY_INLINE __m256i Magnitudes(const uint8_t* q) {
  return _mm256_setr_epi64x(int64_t(kIq2xxsGrid[q[0]]), int64_t(kIq2xxsGrid[q[1]]),
                            int64_t(kIq2xxsGrid[q[2]]), int64_t(kIq2xxsGrid[q[3]]));
}
HWY_INLINE __m256i SignBytes(const Tables& t, uint32_t aux) {
  return _mm256_setr_epi64x(
      int64_t(t.sign_bytes[aux & 127]), int64_t(t.sign_bytes[(aux >> 7) & 127]),
      int64_t(t.sign_bytes[(aux >> 14) & 127]), int64_t(t.sign_bytes[(aux >> 21) & 127]));
}

template <class Dot, int R, int NW>
HWY_INLINE void Tile(const uint8_t* w, const uint8_t* rows_end, size_t row_bytes,
                     const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  const Tables& tables = GetTables();
  const int64_t nb = x.k / 32;
  __m256 acc[2][R][NW];  // even, odd blocks
  for (int h = 0; h < 2; ++h)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < NW; ++j) acc[h][r][j] = _mm256_setzero_ps();
  const int8_t* xq = x.qs + r0 * x.k;
  const float* xd = x.d + r0 * nb;
  for (int64_t b = 0; b < nb; b += 8) {
    alignas(32) float scales[NW][8];
    for (int j = 0; j < NW; ++j) {
      const uint8_t* super = w + size_t(j) * row_bytes + size_t(b / 8) * kSuperBytes;
      alignas(32) int32_t s[8];
      for (int i = 0; i < 8; ++i) s[i] = int32_t(vnni::LoadU32(super + 2 + 8 * i + 4) >> 28);
      _mm256_store_ps(
          scales[j],
          BlockScales(F16ToF32(LoadU16(super)),
                      _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s)))));
    }
    PrefetchAhead<NW>(w, row_bytes, rows_end, b / 8);
    for (int i = 0; i < 8; ++i) {
      __m256i xv[R];
      __m256 dx[R];
      for (int r = 0; r < R; ++r) {
        xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * x.k + 32 * (b + i)));
        dx[r] = _mm256_set1_ps(xd[r * nb + b + i]);
      }
      for (int j = 0; j < NW; ++j) {
        const uint8_t* q = w + size_t(j) * row_bytes + size_t(b / 8) * kSuperBytes + 2 + 8 * i;
        const __m256i u = Magnitudes(q);
        const __m256i sign = SignBytes(tables, vnni::LoadU32(q + 4));
        const __m256 scale = _mm256_set1_ps(scales[j][i]);
        for (int r = 0; r < R; ++r) {
          const __m256i lanes = vnni::DotLanes(u, _mm256_sign_epi8(xv[r], sign), Dot());
          acc[i % 2][r][j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lanes), dx[r]), scale,
                                             acc[i % 2][r][j]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j)
      y[r * ldy + j] = vnni::HorizontalSum(_mm256_add_ps(acc[0][r][j], acc[1][r][j]));
}

#endif  // HWY_TARGET == HWY_AVX3_DL

// The block type for vnni::MatmulRows: it runs its own tile.
template <class DotForm>
struct Block {
  using Dot = DotForm;
  template <int R, int NW>
  static HWY_INLINE void OwnTile(const uint8_t* w, const uint8_t* rows_end, size_t row_bytes,
                                 const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
#if HWY_TARGET == HWY_AVX3_DL
    Tile<R, NW>(w, rows_end, row_bytes, x, r0, y, ldy);
#else
    Tile<Dot, R, NW>(w, rows_end, row_bytes, x, r0, y, ldy);
#endif
  }
};

}  // namespace iq2xxs

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
