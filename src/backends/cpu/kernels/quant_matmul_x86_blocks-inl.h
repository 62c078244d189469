// The x86 integer kernels' blocks for the GGUF types of the low-bit releases:
// q2_k, q3_k, iq4_xs and mxfp4, each a Block for vnni::Tile
// (quant_matmul_vnni-inl.h: four weight rows at a time, the dot in the form
// of the `Dot` parameter); and the helpers of the q5_0 / q5_1 / iq4_nl
// formats of the packed kernels (quant_matmul_packed-inl.h). Included by
// quant_matmul.cc inside the AVX2 and AVX3_DL targets' namespaces, after
// quant_matmul_vnni-inl.h.
//
// Each block turns its 32 weights into bytes a dot form takes exactly (see
// quant_matmul_x86_dot-inl.h: unsigned values <= 128 against signed
// activations): small unsigned codes whose offset comes back out through the
// lane sums of x (q3_k), codes and mins in f32 (q2_k), or, for signed
// values (the non-linear iq4 / mxfp4 levels), |w| against x with w's sign. So every dot form gives the same
// integers and AVX2 gives AVX-512's bits; f32 scales per int32 lane carry the
// k-quants' scales per 16 values.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace vnni {

// Values i = 0..15 from the low nibbles of qs[0..15], 16..31 from the high.
HWY_INLINE __m256i Nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4), _mm_and_si128(v, low4));
}

// Byte i = `value` where bit i of `bits` is set, else 0.
HWY_INLINE __m256i BitsToBytes(uint32_t bits, char value) {
  // Byte i takes byte i / 8 of the word (both 128-bit lanes hold all four).
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                       3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(value));
}

HWY_INLINE uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

HWY_INLINE __m256i DotLanes(__m256i u, __m256i x, auto dot) {
  return decltype(dot)::Add(_mm256_setzero_si256(), u, x);
}

// acc + dx * scale * float(lanes), the f32 steps of every block with one scale.
HWY_INLINE __m256 ScaleInto(__m256i lanes, __m256 dx, __m256 scale, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lanes), dx), scale, acc);
}

struct NoSuper {
  HWY_INLINE void Load(const uint8_t*, int64_t) {}
};

// 16 signed levels of a non-linear 4-bit code, for vpshufb in both lanes.
struct Iq4Levels {
  static HWY_INLINE __m256i Table() {
    return _mm256_broadcastsi128_si256(
        _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
  }
};
// MXFP4's e2m1 values, doubled (the scale is halved).
struct E2M1Levels {
  static HWY_INLINE __m256i Table() {
    return _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  }
};

// Signed values w as |w| against x with w's sign (|w| <= 127, x in
// [-127, 127]: exact in every dot form).
HWY_INLINE __m256i SignedDot(__m256i w, __m256i x, auto dot) {
  return DotLanes(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w), dot);
}

// mxfp4: an e8m0 exponent byte, 16 bytes of e2m1 codes.
template <class DotForm>
struct Mxfp4Block {
  using Dot = DotForm;
  using Super = NoSuper;
  static constexpr size_t kSuperBytes = 17;
  static constexpr int kBlocksPerSuper = 1;
  static constexpr bool kXSum = false;
  __m256i w;
  __m256 d;
  HWY_INLINE Mxfp4Block(const uint8_t* row, int64_t b, const Super&) {
    const uint8_t* blk = row + size_t(b) * kSuperBytes;
    // 2^(e - 127) halved, as the reference builds it (subnormal for e < 2).
    const uint32_t e = blk[0];
    d = _mm256_set1_ps(std::bit_cast<float>(e < 2 ? uint32_t(0x00200000) << e : (e - 1) << 23));
    w = _mm256_shuffle_epi8(E2M1Levels::Table(), Nibbles32(blk + 1));
  }
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i, __m256 dx, __m256 acc) const {
    return ScaleInto(SignedDot(w, x, Dot()), dx, d, acc);
  }
};

// Lane j of v in every lane.
HWY_INLINE __m256 LaneOf(__m256 v, int j) {
  return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j));
}

// iq4_xs super-block: f16 d, u16 of 2 high scale bits per 32, 4 bytes of low
// scale nibbles, 128 bytes of iq4 codes (16 per block of 32); scales - 32.
template <class DotForm>
struct Iq4XsBlock {
  using Dot = DotForm;
  static constexpr size_t kSuperBytes = 136;
  static constexpr int kBlocksPerSuper = 8;
  static constexpr bool kXSum = false;
  struct Super {
    __m256 scales;  // lane j: d (ls_j - 32)
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      uint16_t high;
      std::memcpy(&high, super + 2, 2);
      // Lane j: nibble j of the 4 low-scale bytes, bits 2j..2j+1 of `high`.
      const __m256i low4 = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(int(LoadU32(super + 4))),
                            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
          _mm256_set1_epi32(0x0f));
      const __m256i high2 = _mm256_and_si256(
          _mm256_srlv_epi32(_mm256_set1_epi32(high), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
          _mm256_set1_epi32(3));
      const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(low4, _mm256_slli_epi32(high2, 4)),
                                          _mm256_set1_epi32(32));
      scales = _mm256_mul_ps(BroadcastF16(super), _mm256_cvtepi32_ps(ls));
    }
  };
  __m256i w;
  __m256 d;
  HWY_INLINE Iq4XsBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    w = _mm256_shuffle_epi8(Iq4Levels::Table(),
                            Nibbles32(row + size_t(b / 8) * kSuperBytes + 8 + 16 * j));
    d = LaneOf(super.scales, j);
  }
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i, __m256 dx, __m256 acc) const {
    return ScaleInto(SignedDot(w, x, Dot()), dx, d, acc);
  }
};

// The f32 scales of the 4 int32 lanes of each half of block j (values 0..15:
// sub-block 2j, 16..31: 2j + 1) from the 16 per-16 scales in low (0..7) and
// high (8..15).
HWY_INLINE __m256 SubBlockLanes(__m256 low, __m256 high, int j) {
  const __m256i lanes = _mm256_add_epi32(_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                                         _mm256_set1_epi32(2 * (j % 4)));
  return _mm256_permutevar8x32_ps(j < 4 ? low : high, lanes);
}

// Codes 0..3 of block j of a q2_k / q3_k super-block: bits 2 (j % 4) of the
// 32 bytes at qs + 32 (j / 4).
HWY_INLINE __m256i TwoBitCodes(const uint8_t* qs, int j) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (j / 4)));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (j % 4))),
                          _mm256_set1_epi8(3));
}

// q2_k super-block: 16 bytes of (4-bit scale, 4-bit min) per 16 values, 64
// bytes of 2-bit codes, f16 d, f16 dmin: value = d sc code - dmin min.
template <class DotForm>
struct Q2_KBlock {
  using Dot = DotForm;
  static constexpr size_t kSuperBytes = 84;
  static constexpr int kBlocksPerSuper = 8;
  static constexpr bool kXSum = true;
  struct Super {
    __m256 scale_low, scale_high, min_low, min_high;
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(super));
      const __m128i low4 = _mm_set1_epi8(0x0f);
      const __m128i sc = _mm_and_si128(bytes, low4);
      const __m128i mn = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4);
      const __m256 d = BroadcastF16(super + 80), dmin = BroadcastF16(super + 82);
      auto f32 = [](__m128i v) HWY_ATTR { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); };
      scale_low = _mm256_mul_ps(d, f32(sc));
      scale_high = _mm256_mul_ps(d, f32(_mm_srli_si128(sc, 8)));
      min_low = _mm256_mul_ps(dmin, f32(mn));
      min_high = _mm256_mul_ps(dmin, f32(_mm_srli_si128(mn, 8)));
    }
  };
  __m256i u;
  __m256 scale, min;
  HWY_INLINE Q2_KBlock(const uint8_t* row, int64_t b, const Super& super) {
    const int j = int(b % 8);
    u = TwoBitCodes(row + size_t(b / 8) * kSuperBytes + 16, j);
    scale = SubBlockLanes(super.scale_low, super.scale_high, j);
    min = SubBlockLanes(super.min_low, super.min_high, j);
  }
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i xsum4, __m256 dx, __m256 acc) const {
    acc = ScaleInto(DotLanes(u, x, Dot()), dx, scale, acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(xsum4), dx), min, acc);
  }
};

// q3_k super-block: 32 bytes of high bits (bit j of byte l: value 32 j + l),
// 64 bytes of 2-bit codes as q2_k's, 12 bytes of 6-bit scales per 16 (- 32),
// f16 d. The code with its high bit is 0..7; the value is that - 4.
template <class DotForm>
struct Q3_KBlock {
  using Dot = DotForm;
  static constexpr size_t kSuperBytes = 110;
  static constexpr int kBlocksPerSuper = 8;
  static constexpr bool kXSum = true;
  struct Super {
    __m256 low, high;  // d (scale - 32) of sub-blocks 0-7, 8-15
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      // Scale j: low nibble of byte j (j < 8) or high nibble of byte j - 8,
      // and bits 2 (j / 4) of byte 8 + j % 4 on top.
      alignas(16) uint8_t sc[16] = {};
      std::memcpy(sc, super + 96, 12);
      const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(sc));
      const __m128i low4 = _mm_set1_epi8(0x0f);
      const __m128i nibbles = _mm_unpacklo_epi64(_mm_and_si128(bytes, low4),
                                                 _mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
      const __m128i high2 = _mm_and_si128(
          _mm_srlv_epi32(_mm_set1_epi32(int(LoadU32(sc + 8))), _mm_setr_epi32(0, 2, 4, 6)),
          _mm_set1_epi8(3));
      const __m128i v = _mm_sub_epi8(_mm_or_si128(nibbles, _mm_slli_epi16(high2, 4)),
                                     _mm_set1_epi8(32));
      const __m256 d = BroadcastF16(super + 108);
      low = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)));
      high = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))));
    }
  };
  __m256i u;
  __m256 scale;
  HWY_INLINE Q3_KBlock(const uint8_t* row, int64_t b, const Super& super) {
    const uint8_t* blk = row + size_t(b / 8) * kSuperBytes;
    const int j = int(b % 8);
    const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128(j)),
                                          _mm256_set1_epi8(1));
    u = _mm256_or_si256(TwoBitCodes(blk + 32, j), _mm256_slli_epi16(high, 2));  // no carry
    scale = SubBlockLanes(super.low, super.high, j);
  }
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i xsum4, __m256 dx, __m256 acc) const {
    const __m256i lanes = _mm256_sub_epi32(DotLanes(u, x, Dot()), _mm256_slli_epi32(xsum4, 2));
    return ScaleInto(lanes, dx, scale, acc);
  }
};

}  // namespace vnni

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
