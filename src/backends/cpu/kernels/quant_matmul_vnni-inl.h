// Decode-shaped integer matmul for q8_0 and q4_0 weights on AVX-512 VNNI
// (Highway's AVX3_DL target), included by quant_matmul.cc inside that target's
// namespace. Small steps (decode, small batches) read each weight once and do
// little arithmetic per byte, so the loop is shaped for the front end: four
// weight rows at a time (four independent accumulator chains, one horizontal
// sum per output instead of per block), scales broadcast straight from the f16
// bits, nothing staged through memory.
//
// Per block b of weight row n and activation row r:
//   y[r][n] += dw[n][b] * (dx[r][b] * dot(w, xq) + offset term)
// q8_0 multiplies |w| (unsigned) by sign(x, w), so the unsigned x signed VNNI
// product needs no offset. q4_0 multiplies the nibbles 0..15 by x and takes
// the 8 back out with the activation block sum s = dx * sum(xq): adding -s to
// each of the 8 int32 lanes of the block's partial sums subtracts 8 s in total.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL

namespace vnni {

// acc += per 4 bytes: u (unsigned) . s (signed), in the EVEX encoding (see
// DotU8I8 in quant_matmul.cc for why it is spelt out).
HWY_INLINE __m256i Dpbusd(__m256i acc, __m256i u, __m256i s) {
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
  return acc;
}

// The block's f16 scale, in every lane.
HWY_INLINE __m256 BroadcastF16(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _mm256_cvtph_ps(_mm_set1_epi16(short(bits)));
}

HWY_INLINE float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One weight block prepared for any number of activation rows.
struct Q8_0Block {
  static constexpr size_t kBytes = 34;
  static constexpr bool kNibbleOffset = false;
  __m256i magnitude, signs;
  HWY_INLINE explicit Q8_0Block(const uint8_t* blk)
      : signs(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2))) {
    magnitude = _mm256_abs_epi8(signs);  // -128 becomes 128 as an unsigned byte
  }
  HWY_INLINE __m256i Dot(__m256i x) const {
    return Dpbusd(_mm256_setzero_si256(), magnitude, _mm256_sign_epi8(x, signs));
  }
};

struct Q4_0Block {
  static constexpr size_t kBytes = 18;
  static constexpr bool kNibbleOffset = true;
  __m256i nibbles;  // values 0..15: bytes 0..15 low nibbles, 16..31 high
  HWY_INLINE explicit Q4_0Block(const uint8_t* blk) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    nibbles = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4), _mm_and_si128(v, low4));
  }
  HWY_INLINE __m256i Dot(__m256i x) const { return Dpbusd(_mm256_setzero_si256(), nibbles, x); }
};

// y[r0 + r][n + j] for r < R activation rows and j < NW weight rows starting at w.
template <class Block, int R, int NW>
HWY_INLINE void Tile(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x,
                     int64_t r0, float* y, int64_t ldy) {
  const int64_t nb = x.k / 32;
  __m256 acc[R][NW];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm256_setzero_ps();
  const int8_t* xq = x.qs + r0 * x.k;
  const float* xd = x.d + r0 * nb;
  const float* xs = x.s + r0 * nb;
  // Four interleaved rows defeat the hardware stream prefetcher, so fetch the
  // group after next ourselves, at the pace this group is consumed.
  constexpr size_t kBytesPerStep = NW * Block::kBytes;
  constexpr int kPrefetchLines = int((kBytesPerStep + 63) / 64) + 1;
  const uint8_t* prefetch = w + 2 * NW * row_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (NW > 1) {
      for (int i = 0; i < kPrefetchLines; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(prefetch + b * kBytesPerStep + 64 * i), _MM_HINT_T0);
    }
    __m256i xv[R];
    __m256 dx[R], offset[R];
    for (int r = 0; r < R; ++r) {
      xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * x.k + 32 * b));
      dx[r] = _mm256_set1_ps(xd[r * nb + b]);
      if constexpr (Block::kNibbleOffset) offset[r] = _mm256_set1_ps(-xs[r * nb + b]);
    }
    for (int j = 0; j < NW; ++j) {
      const uint8_t* blk = w + size_t(j) * row_bytes + size_t(b) * Block::kBytes;
      const Block block(blk);
      const __m256 dw = BroadcastF16(blk);
      for (int r = 0; r < R; ++r) {
        const __m256 dot = _mm256_cvtepi32_ps(block.Dot(xv[r]));
        const __m256 scaled = Block::kNibbleOffset ? _mm256_fmadd_ps(dot, dx[r], offset[r])
                                                   : _mm256_mul_ps(dot, dx[r]);
        acc[r][j] = _mm256_fmadd_ps(scaled, dw, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j) y[r * ldy + j] = HorizontalSum(acc[r][j]);
}

template <class Block, int R>
HWY_INLINE void RowGroups(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x,
                          int64_t r0, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  int64_t n = n0;
  for (; n + kRows <= n1; n += kRows)
    Tile<Block, R, kRows>(w + size_t(n) * row_bytes, row_bytes, x, r0, y + r0 * ldy + n, ldy);
  for (; n < n1; ++n) Tile<Block, R, 1>(w + size_t(n) * row_bytes, row_bytes, x, r0, y + r0 * ldy + n, ldy);
}

// Rows [n0, n1) of y for every activation row, four activation rows at a time.
template <class Block>
void MatmulRows(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x, int64_t n0,
                int64_t n1, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < x.t; r0 += 4) {
    switch (std::min<int64_t>(4, x.t - r0)) {
      case 1:
        RowGroups<Block, 1>(w, row_bytes, x, r0, n0, n1, y, ldy);
        break;
      case 2:
        RowGroups<Block, 2>(w, row_bytes, x, r0, n0, n1, y, ldy);
        break;
      case 3:
        RowGroups<Block, 3>(w, row_bytes, x, r0, n0, n1, y, ldy);
        break;
      default:
        RowGroups<Block, 4>(w, row_bytes, x, r0, n0, n1, y, ldy);
        break;
    }
  }
}

}  // namespace vnni

#endif  // HWY_TARGET == HWY_AVX3_DL
