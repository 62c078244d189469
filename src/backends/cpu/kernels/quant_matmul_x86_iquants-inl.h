// The x86 integer kernels' blocks for the codebook i-quants other than
// iq2_xxs: iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s and iq1_m (the experts of the
// "dynamic" IQ1 / IQ2_M / IQ3_M releases), each a Block for vnni::Tile (four
// weight rows at a time, the dot in the form of the `Dot` parameter). Included
// by quant_matmul.cc inside the AVX2 and AVX3_DL targets' namespaces, after
// quant_matmul_iq2xxs-inl.h (whose sign table the 7-bit patterns share).
//
// Each group of 8 (or 4) weights indexes a codebook row (core/iq_grids.h):
// the row is looked up as it stands and its magnitudes go into the dot
// unsigned against x carrying the weights' signs (iq2 / iq3), or, for iq1's
// values g + delta with g in {-1, 0, 1} and delta = +-1/8, as the exact
// integers 8 g +- 1 against x (|w| <= 9), the 1/8 folded into the scale.
// Scales per 16 values (iq2_xs, iq2_s, iq1_m) ride per int32 lane as f32, as
// the k-quants' do. Every dot form gets the same integers, so AVX2 gives
// AVX-512's bits.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace vnni {

// Rows of a uint64 codebook (8 bytes each) in the four qwords.
HWY_INLINE __m256i Rows64(const uint64_t* grid, uint32_t i0, uint32_t i1, uint32_t i2,
                          uint32_t i3) {
  return _mm256_setr_epi64x(int64_t(grid[i0]), int64_t(grid[i1]), int64_t(grid[i2]),
                            int64_t(grid[i3]));
}

// +1 / -1 bytes from sign bits (bit i set: value i negative), for vpsignb.
HWY_INLINE __m256i SignBytesOf(uint32_t bits) {
  return _mm256_or_si256(BitsToBytes(bits, char(-1)), _mm256_set1_epi8(1));
}

// The +1 / -1 bytes of four 7-bit sign patterns (the eighth sign makes the
// count of negatives even), from iq2_xxs' table.
HWY_INLINE __m256i EvenSignBytes(uint32_t p0, uint32_t p1, uint32_t p2, uint32_t p3) {
  const uint64_t* t = iq2xxs::GetTables().sign_bytes;
  return _mm256_setr_epi64x(int64_t(t[p0]), int64_t(t[p1]), int64_t(t[p2]), int64_t(t[p3]));
}

// iq1's exact integers 8 g + sigma from codebook values g (int8 in {-1, 0, 1})
// and the per-group delta signs sigma (+1 / -1 bytes).
HWY_INLINE __m256i Iq1Integers(__m256i g, __m256i sigma) {
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), sigma);
}

// The 16 scales per 16 values of a super-block as f32, sub-blocks 0-7 in
// `low` and 8-15 in `high`, each (d (0.5 + s)) / 4 from 4-bit s: nibble m % 2
// of byte m / 2 for sub-block m (iq2_xs, iq2_s).
struct Iq2SubBlockScales {
  __m256 low, high;
  HWY_INLINE void Load(const uint8_t* super, size_t scale_offset) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(super + scale_offset));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(bytes, low4),
                                        _mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
    const float d = F16ToF32(LoadU16(super));
    low = iq2xxs::BlockScales(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s)));
    high = iq2xxs::BlockScales(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(s, 8))));
  }
};

// What every block type here shares: super-blocks of 8 blocks, no lane sums
// of x, and the dot of its 32 weights prepared by the constructor.
template <class DotForm>
struct CodebookBlockBase {
  using Dot = DotForm;
  static constexpr int kBlocksPerSuper = 8;
  static constexpr bool kXSum = false;
  __m256 scale;  // per int32 lane
};

// iq2 / iq3: unsigned magnitudes u against x with the weights' signs.
template <class DotForm>
struct MagnitudeBlock : CodebookBlockBase<DotForm> {
  __m256i u, signs;
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i, __m256 dx, __m256 acc) const {
    return ScaleInto(DotLanes(u, _mm256_sign_epi8(x, signs), DotForm()), dx, this->scale, acc);
  }
};

// iq1: the signed integers w = 8 g + sigma.
template <class DotForm>
struct Iq1Block : CodebookBlockBase<DotForm> {
  __m256i w;
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i, __m256 dx, __m256 acc) const {
    return ScaleInto(SignedDot(w, x, DotForm()), dx, this->scale, acc);
  }
};

// iq2_xs super-block: f16 d, 32 u16 (9-bit codebook index, 7-bit sign
// pattern), 8 bytes of 4-bit scales per 16 values.
template <class DotForm>
struct Iq2XsBlock : MagnitudeBlock<DotForm> {
  static constexpr size_t kSuperBytes = 74;
  struct Super : Iq2SubBlockScales {
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      Iq2SubBlockScales::Load(row + size_t(b / 8) * kSuperBytes, 66);
    }
  };
  HWY_INLINE Iq2XsBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* q = row + size_t(b / 8) * kSuperBytes + 2 + 8 * j;
    uint16_t g[4];
    std::memcpy(g, q, 8);
    this->u = Rows64(kIq2xsGrid, g[0] & 511u, g[1] & 511u, g[2] & 511u, g[3] & 511u);
    this->signs = EvenSignBytes(g[0] >> 9, g[1] >> 9, g[2] >> 9, g[3] >> 9);
    this->scale = SubBlockLanes(super.low, super.high, j);
  }
};

// iq2_s super-block: f16 d, 32 low index bytes, 32 sign bytes, 8 bytes of 2
// high index bits per group, 8 bytes of 4-bit scales per 16 values.
template <class DotForm>
struct Iq2SBlock : MagnitudeBlock<DotForm> {
  static constexpr size_t kSuperBytes = 82;
  struct Super : Iq2SubBlockScales {
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      Iq2SubBlockScales::Load(row + size_t(b / 8) * kSuperBytes, 74);
    }
  };
  HWY_INLINE Iq2SBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* s = row + size_t(b / 8) * kSuperBytes;
    const uint8_t* qs = s + 2 + 4 * j;
    const uint32_t qh = s[66 + j];
    this->u = Rows64(kIq2sGrid, qs[0] | (qh & 3) << 8, qs[1] | (qh << 6 & 0x300),
                     qs[2] | (qh << 4 & 0x300), qs[3] | (qh << 2 & 0x300));
    this->signs = SignBytesOf(LoadU32(s + 34 + 4 * j));
    this->scale = SubBlockLanes(super.low, super.high, j);
  }
};

// iq3_xxs super-block: f16 d, 64 codebook bytes (4 values each), 8 u32 of
// four 7-bit sign patterns and a 4-bit scale, (d (0.5 + s)) / 2 per block.
template <class DotForm>
struct Iq3XxsBlock : MagnitudeBlock<DotForm> {
  static constexpr size_t kSuperBytes = 98;
  struct Super {
    __m256 scales;  // lane j: block j
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      const __m256i aux = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 66));
      const __m256 s = _mm256_cvtepi32_ps(_mm256_srli_epi32(aux, 28));
      const __m256 d = _mm256_set1_ps(F16ToF32(LoadU16(super)));
      scales = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_add_ps(s, _mm256_set1_ps(0.5f))),
                             _mm256_set1_ps(0.5f));
    }
  };
  HWY_INLINE Iq3XxsBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* s = row + size_t(b / 8) * kSuperBytes;
    const uint8_t* q = s + 2 + 8 * j;
    const uint32_t aux = LoadU32(s + 66 + 4 * j);
    const uint32_t* g = kIq3xxsGrid;
    this->u = _mm256_setr_epi32(int(g[q[0]]), int(g[q[1]]), int(g[q[2]]), int(g[q[3]]),
                                int(g[q[4]]), int(g[q[5]]), int(g[q[6]]), int(g[q[7]]));
    this->signs = EvenSignBytes(aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
    this->scale = LaneOf(super.scales, j);
  }
};

// iq3_s super-block: f16 d, 64 low index bytes, 8 bytes of high index bits
// (bit m of byte j: index 8 j + m), 32 sign bytes, 4-bit scales per block
// (d (1 + 2 s)).
template <class DotForm>
struct Iq3SBlock : MagnitudeBlock<DotForm> {
  static constexpr size_t kSuperBytes = 110;
  struct Super {
    __m256 scales;  // lane j: block j
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      const __m256i s =
          _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(LoadU32(super + 106))),
                                             _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                           _mm256_set1_epi32(0x0f));
      const __m256i odd = _mm256_add_epi32(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1));
      scales = _mm256_mul_ps(_mm256_set1_ps(F16ToF32(LoadU16(super))), _mm256_cvtepi32_ps(odd));
    }
  };
  HWY_INLINE Iq3SBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* s = row + size_t(b / 8) * kSuperBytes;
    const uint8_t* q = s + 2 + 8 * j;
    const uint32_t qh = s[66 + j];
    const uint32_t* g = kIq3sGrid;
    const auto at = [&](int m) { return int(g[q[m] | (qh << (8 - m) & 0x100)]); };
    this->u = _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
    this->signs = SignBytesOf(LoadU32(s + 74 + 4 * j));
    this->scale = LaneOf(super.scales, j);
  }
};

// iq1_s super-block: f16 d, 32 low index bytes, 8 u16 (per block: 4 x 3 high
// index bits, a 3-bit scale s, the delta's sign on top); per block the scale
// d (2 s + 1) / 8 of the integers 8 g +- 1.
template <class DotForm>
struct Iq1SBlock : Iq1Block<DotForm> {
  static constexpr size_t kSuperBytes = 50;
  struct Super {
    float d;
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      d = F16ToF32(LoadU16(row + size_t(b / 8) * kSuperBytes));
    }
  };
  HWY_INLINE Iq1SBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* s = row + size_t(b / 8) * kSuperBytes;
    const uint8_t* qs = s + 2 + 4 * j;
    const uint32_t h = LoadU16(s + 34 + 2 * j);
    const __m256i g = Rows64(kIq1sGrid, qs[0] | (h & 7) << 8, qs[1] | (h << 5 & 0x700),
                             qs[2] | (h << 2 & 0x700), qs[3] | (h >> 1 & 0x700));
    this->w = Iq1Integers(g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
    this->scale = _mm256_set1_ps(super.d * float(2 * ((h >> 12) & 7) + 1) * 0.125f);
  }
};

// iq1_m super-block: 32 low index bytes, 16 bytes of nibbles (3 high index
// bits and the delta's sign per group of 8), 4 u16 of 3-bit scales per 16
// values (d (2 s + 1)) with the f16 d in their top nibbles.
template <class DotForm>
struct Iq1MBlock : Iq1Block<DotForm> {
  static constexpr size_t kSuperBytes = 56;
  struct Super {
    __m256 low, high;  // d (2 s + 1) / 8 of sub-blocks 0-7, 8-15
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      uint16_t sc[4];
      std::memcpy(sc, super + 48, 8);
      const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                       ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
      const __m256 d8 = _mm256_set1_ps(F16ToF32(d_bits) * 0.125f);
      // Sub-block m: bits 3 (m % 4) of sc[m / 4].
      const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
      const auto odd = [&](uint16_t a, uint16_t c) HWY_ATTR {
        const __m256i v = _mm256_setr_epi32(a, a, a, a, c, c, c, c);
        const __m256i s = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), _mm256_set1_epi32(7));
        return _mm256_mul_ps(d8, _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(s, 1),
                                                                     _mm256_set1_epi32(1))));
      };
      low = odd(sc[0], sc[1]);
      high = odd(sc[2], sc[3]);
    }
  };
  HWY_INLINE Iq1MBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    const uint8_t* s = row + size_t(b / 8) * kSuperBytes;
    const uint8_t* qs = s + 4 * j;
    const uint32_t h = LoadU16(s + 32 + 2 * j);  // the nibbles of groups 4j..4j+3
    const __m256i g = Rows64(kIq1sGrid, qs[0] | (h & 7) << 8, qs[1] | (h << 4 & 0x700),
                             qs[2] | (h & 0x700), qs[3] | (h >> 4 & 0x700));
    // Group l's 8 delta signs: bytes -1 where its nibble's top bit is set, else +1.
    const auto sigma = [&](int l) {
      return h >> (4 * l + 3) & 1 ? int64_t(-1) : int64_t(0x0101010101010101);
    };
    const __m256i sigmas = _mm256_setr_epi64x(sigma(0), sigma(1), sigma(2), sigma(3));
    this->w = Iq1Integers(g, sigmas);
    this->scale = SubBlockLanes(super.low, super.high, j);
  }
};

}  // namespace vnni

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
