// Integer matmul for q6_k weights on x86: AVX-512 VNNI (Highway's AVX3_DL
// target) and AVX2 with or without AVX-VNNI, the dot products in the form of
// the `Dot` parameter (quant_matmul_x86_dot-inl.h). Included by quant_matmul.cc
// inside those targets' namespaces (q8_0, q4_0 and q4_1 have their own kernels
// in quant_matmul_packed-inl.h). Decode steps read each weight once and do
// little arithmetic per byte, so the loop is shaped
// for the front end: four weight rows at a time (four independent accumulator
// chains, one horizontal sum per output instead of per block), scales once per
// super-block, nothing staged through memory. Each output row is computed the
// same way whatever the number of activation rows, tile shape or dot form
// (the q6_k values 0..63 never saturate vpmaddubsw's pairs), so AVX2 gives
// AVX-512's bits.
//
// Per block b of weight row n and activation row r:
//   y[r][n] += scale[n][b] * dx[r][b] * (dot(q, xq) - 32 sum(xq))

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace vnni {

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

// One block of 32 weights of a row, prepared for any number of activation
// rows: Accumulate(x, xsum4, dx, acc) adds its dot with the activation block
// (int8 x, scale dx; xsum4 the sums of each 4 lanes of x, where kXSum) to the
// 8 f32 lanes of acc. Every block type of quant_matmul_x86_blocks-inl.h has
// this shape, with a Super of per-super-block state loaded once per
// kBlocksPerSuper blocks (nothing for the blocks of 32).
// q6_k: block j of a 256-value super-block takes the low (j % 4 < 2) or high
// nibbles of ql[64 (j / 4) + 32 (j % 2)] and bits 2 (j % 4) of qh[32 (j / 4)];
// values q - 32 with an int8 scale per 16. The unsigned q goes into VNNI, and
// 32 x (sum of x per 4 lanes) comes back out, lane by lane, before the scales.
template <class DotForm>
struct Q6_KBlock {
  using Dot = DotForm;
  static constexpr size_t kSuperBytes = 210;
  static constexpr int kBlocksPerSuper = 8;
  static constexpr bool kXSum = true;  // Accumulate reads xsum4
  // The super-block's 16 sub-block scales times d, as f32, once per 8 blocks.
  struct Super {
    __m256 low, high;  // sub-blocks 0-7, 8-15
    HWY_INLINE void Load(const uint8_t* row, int64_t b) {
      const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
      const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(super + 192));
      const __m256 d = BroadcastF16(super + 208);
      low = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(scales)), d);
      high = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(scales, 8))), d);
    }
  };
  __m256i q;
  __m256 scale;
  HWY_INLINE Q6_KBlock(const uint8_t* row, int64_t b, const Super& super_scales) {
    const uint8_t* super = row + size_t(b / 8) * kSuperBytes;
    const int j = int(b % 8), half = j / 4, quarter = j % 4;
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 64 * half + 32 * (quarter & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(super + 128 + 32 * half));
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i nibble =
        quarter < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
    const __m256i high2 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)),
                                           _mm256_set1_epi8(0x03));
    q = _mm256_or_si256(nibble, _mm256_slli_epi16(high2, 4));  // 0..63, no carry across bytes
    // Lanes 0-3 take sub-block 2j, lanes 4-7 sub-block 2j + 1.
    const __m256i lanes = _mm256_add_epi32(_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
                                           _mm256_set1_epi32(2 * quarter));
    scale = _mm256_permutevar8x32_ps(half ? super_scales.high : super_scales.low, lanes);
  }
  // acc + dx x this block's dot with x, per int32 lane (xsum4: the lane sums of x).
  HWY_INLINE __m256 Accumulate(__m256i x, __m256i xsum4, __m256 dx, __m256 acc) const {
    const __m256i lanes =
        _mm256_sub_epi32(Dot::Add(_mm256_setzero_si256(), q, x), _mm256_slli_epi32(xsum4, 5));
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lanes), dx), scale, acc);
  }
};

// y[r0 + r][n + j] for r < R activation rows and j < NW weight rows starting at
// w; rows before `rows_end` may be prefetched.
template <class Block, int R, int NW>
HWY_INLINE void Tile(const uint8_t* w, const uint8_t* rows_end, size_t row_bytes,
                     const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  const int64_t nb = x.k / 32;
  __m256 acc[R][NW];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm256_setzero_ps();
  const int8_t* xq = x.qs + r0 * x.k;
  const float* xd = x.d + r0 * nb;
  // Four interleaved rows defeat the hardware stream prefetcher, so fetch the
  // group after next ourselves, at the pace this group is consumed, and no
  // further than this task's rows (the next ones may belong to another thread).
  constexpr size_t kBytesPerStep = NW * Block::kSuperBytes / Block::kBlocksPerSuper;
  constexpr int kPrefetchLines = int((kBytesPerStep + 63) / 64) + 1;
  const uint8_t* prefetch = w + 2 * NW * row_bytes;
  typename Block::Super super[NW] = {};  // loaded at b = 0; zeroed so GCC sees it set
  for (int64_t b = 0; b < nb; ++b) {
    if (b % Block::kBlocksPerSuper == 0) {
      for (int j = 0; j < NW; ++j) super[j].Load(w + size_t(j) * row_bytes, b);
    }
    if constexpr (NW > 1) {
      for (int i = 0; i < kPrefetchLines; ++i) {
        const uint8_t* line = prefetch + b * kBytesPerStep + 64 * i;
        if (line < rows_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
      }
    }
    __m256i xv[R], xsum4[R];
    __m256 dx[R];
    for (int r = 0; r < R; ++r) {
      xv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * x.k + 32 * b));
      dx[r] = _mm256_set1_ps(xd[r * nb + b]);
      // The sum of each 4 lanes of x, for the blocks' offsets and mins.
      xsum4[r] = Block::kXSum ? Block::Dot::Add(_mm256_setzero_si256(), _mm256_set1_epi8(1), xv[r])
                              : _mm256_setzero_si256();
    }
    for (int j = 0; j < NW; ++j) {
      const Block block(w + size_t(j) * row_bytes, b, super[j]);
      for (int r = 0; r < R; ++r) acc[r][j] = block.Accumulate(xv[r], xsum4[r], dx[r], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NW; ++j) y[r * ldy + j] = HorizontalSum(acc[r][j]);
}

// Tile, or the block type's own tile where it has one (iq2_xxs).
template <class Block, int R, int NW>
HWY_INLINE void RunTile(const uint8_t* w, const uint8_t* rows_end, size_t row_bytes,
                        const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  if constexpr (requires { &Block::template OwnTile<R, NW>; }) {
    Block::template OwnTile<R, NW>(w, rows_end, row_bytes, x, r0, y, ldy);
  } else {
    Tile<Block, R, NW>(w, rows_end, row_bytes, x, r0, y, ldy);
  }
}

template <class Block, int R>
HWY_INLINE void RowGroups(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x,
                          int64_t r0, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  const uint8_t* rows_end = w + size_t(n1) * row_bytes;
  // The tiles prefetch two groups ahead; start those two groups' loads now
  // so that a task does not begin with a stall on every line.
  const uint8_t* first = w + size_t(n0) * row_bytes;
  const uint8_t* ramp_end = std::min(rows_end, first + 2 * kRows * row_bytes);
  for (const uint8_t* line = first; line < ramp_end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  int64_t n = n0;
  for (; n + kRows <= n1; n += kRows) {
    RunTile<Block, R, kRows>(w + size_t(n) * row_bytes, rows_end, row_bytes, x, r0,
                          y + r0 * ldy + n, ldy);
  }
  for (; n < n1; ++n) {
    RunTile<Block, R, 1>(w + size_t(n) * row_bytes, rows_end, row_bytes, x, r0, y + r0 * ldy + n,
                      ldy);
  }
}

// Rows [n0, n1) of y for every activation row, four activation rows at a time
// (also on AVX2, whose 16 registers then spill the activations' side to L1:
// kernel_bench q6_k k512_n1536 hot, us, tiles of 2 -> 4: t4 128 -> 106, t8
// 256 -> 210).
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

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
