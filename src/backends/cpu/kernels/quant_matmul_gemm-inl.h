// Prefill GEMM for q8_0 / q4_0 / q4_1 weights stored as panels (panel_layout.h)
// on AVX-512 VNNI (Highway's AVX3_DL target): 16 weight rows x kGemmRowTile
// activation rows per micro-kernel, in 512-bit registers. Included by
// quant_matmul.cc inside the AVX3_DL namespace after quant_matmul_packed-inl.h.
//
// With many activation rows the 256-bit kernels of quant_matmul_packed-inl.h
// are bound by arithmetic, and a Zen 4 core retires about 1.5x the int8
// multiply-adds in 512-bit vpdpbusd as in 256-bit ones (a chain-free loop of
// each: 225 vs 150 GMAC/s at 3.4 GHz). Two stored groups of 8 rows sit side by
// side in the two halves of a zmm, so one vpdpbusd with 4 broadcast activation
// bytes advances 16 dot products, and each block's f32 steps (conversion,
// scale, fma) serve 16 weight rows too.
//
// Each output is computed exactly as MultiplyBlock / StoredPanelRows compute
// it (the block's exact integer dot, acc = fma(float(dot), dw * dx, acc), q4_1
// then acc = fma(m, s, acc), chunks of kChunkBlocks added into y in order):
// f32 operations are per lane, so the vector width does not change a bit,
// and a row's result does not depend on its batch or on which kernel ran.
//
// Activations are taken in slabs that stay in L2 while every weight pair of
// the call passes over them; each pair is read from memory once per slab.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL

namespace gemm {

// Activation rows per micro-kernel: 12 accumulators, 8 weight vectors, the
// scales and two dot chains fit the 32 zmm registers.
constexpr int kGemmRowTile = 12;
// From this many activation rows on, the 16-row kernels run (below, the
// 256-bit ones: decode and small batches).
constexpr int64_t kGemmMinRows = 4;
// Bytes of quantised activations per slab (int8 values and three f32 per
// block): half of a 1 MiB L2, the rest for weights and outputs.
constexpr size_t kSlabBytes = size_t(512) << 10;

// All 16 lanes. The masked forms of the conversions (with this mask: the
// plain instructions' results) leave GCC 12 no undefined pass-through operand
// to warn about (-Wmaybe-uninitialized in avx512fintrin.h).
constexpr __mmask16 kAll = 0xffff;

// acc + per int32 lane: the 4 unsigned bytes of u times the 4 signed bytes at x.
HWY_INLINE __m512i DotBroadcast(__m512i acc, __m512i u, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// 32 bytes of group a in the low half, the same 32 of group b in the high one.
HWY_INLINE __m512i LoadPair(const uint8_t* a, const uint8_t* b) {
  return _mm512_maskz_inserti64x4(
      0xff, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// Block b's values of the two groups: q[c] lanes 0-7 rows of a, 8-15 rows of b,
// as Format::PanelValues gives each half.
template <class Format>
HWY_INLINE void PairValues(const uint8_t* a, const uint8_t* b, __m512i q[8]) {
  if constexpr (Format::kNibbles) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m512i p = LoadPair(a + 32 * c, b + 32 * c);
      q[c] = _mm512_and_si512(p, low4);
      q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low4);
    }
  } else {
    for (int c = 0; c < 8; ++c) q[c] = LoadPair(a + 32 * c, b + 32 * c);
  }
}

// 8 f16 of group a then 8 of group b, as 16 f32 lanes.
HWY_INLINE __m512 PairF16(const uint8_t* a, const uint8_t* b) {
  const __m256i h = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_maskz_cvtph_ps(kAll, h);
}

// y[r0 + r][0..16) for R activation rows from the stored groups a (rows
// 0-7) and b (rows 8-15); block b of the first tile also prefetches its share
// of the next pair at `ahead` (null: none) into L2, not L1, where it would
// evict the pair that the later tiles still read (26 KiB each at k 1536).
template <class Format, int R>
HWY_INLINE void PairRows(const uint8_t* a, const uint8_t* b, const uint8_t* ahead,
                         const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  const int64_t nb = x.k / 32;
  constexpr size_t kShare = 2 * kPanelRows * Format::kBlockBytes;  // the pair's bytes per block
  constexpr size_t kValues = Format::kPanelValueBytes;
  const size_t scales = size_t(nb) * kValues, mins = scales + size_t(nb) * kPanelRows * 2;
  const int8_t* xq[R];
  for (int r = 0; r < R; ++r) xq[r] = x.qs + (r0 + r) * x.k;
  for (int64_t b0 = 0; b0 < nb; b0 += packed::kChunkBlocks) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t blk = b0; blk < std::min(nb, b0 + packed::kChunkBlocks); ++blk) {
      if (ahead != nullptr) {
        for (size_t line = 0; line < kShare; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(ahead + size_t(blk) * kShare + line),
                       _MM_HINT_T1);
      }
      __m512i q[8];
      PairValues<Format>(a + size_t(blk) * kValues, b + size_t(blk) * kValues, q);
      const __m512 d = PairF16(a + scales + size_t(blk) * 16, b + scales + size_t(blk) * 16);
      __m512 m = d;
      if constexpr (Format::kMin) m = PairF16(a + mins + size_t(blk) * 16, b + mins + size_t(blk) * 16);
      for (int r = 0; r < R; ++r) {
        const int64_t xb = (r0 + r) * nb + blk;
        const int8_t* xv = xq[r] + blk * 32;
        // Two chains of four (as VnniBlockDot): the zero point's share first.
        __m512i even = _mm512_set1_epi32(-Format::kZero * x.sum[xb]);
        __m512i odd = _mm512_setzero_si512();
        for (int c = 0; c < 8; c += 2) {
          even = DotBroadcast(even, q[c], xv + 4 * c);
          odd = DotBroadcast(odd, q[c + 1], xv + 4 * c + 4);
        }
        const __m512 dot = _mm512_maskz_cvtepi32_ps(kAll, _mm512_add_epi32(even, odd));
        acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(d, _mm512_set1_ps(x.d[xb])), acc[r]);
        if constexpr (Format::kMin) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(x.s[xb]), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float* out = y + (r0 + r) * ldy;
      _mm512_storeu_ps(out, b0 > 0 ? _mm512_add_ps(acc[r], _mm512_loadu_ps(out)) : acc[r]);
    }
  }
}

// PairRows for rows [r0, r1), in tiles of kGemmRowTile and one tile of the rest.
template <class Format>
HWY_INLINE void PairAllRows(const uint8_t* a, const uint8_t* b, const uint8_t* ahead,
                            const QuantizedActivations& x, int64_t r0, int64_t r1, float* y,
                            int64_t ldy) {
  int64_t r = r0;
  for (; r + kGemmRowTile <= r1; r += kGemmRowTile) {
    PairRows<Format, kGemmRowTile>(a, b, r == r0 ? ahead : nullptr, x, r, y, ldy);
  }
  if (r == r1) return;
  const uint8_t* pf = r == r0 ? ahead : nullptr;
  [&]<int... kRows>(std::integer_sequence<int, kRows...>) HWY_ATTR {
    // One case per remainder 1 .. kGemmRowTile - 1.
    (void)((r1 - r == kRows + 1 ? (PairRows<Format, kRows + 1>(a, b, pf, x, r, y, ldy), true)
                                : false) ||
           ...);
  }(std::make_integer_sequence<int, kGemmRowTile - 1>());
}

// Rows [n0, n1) of y for every activation row (PanelMatmulRows' contract):
// pairs of stored groups by 16 rows, a last single group by the 256-bit kernel.
template <class Format, class Dot>
void StoredGemmRows(const uint8_t* panels, size_t row_bytes, const QuantizedActivations& x,
                    int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const size_t group_bytes = kPanelRows * row_bytes;
  const int64_t pairs_end = n0 + (n1 - n0) / (2 * kPanelRows) * (2 * kPanelRows);
  const size_t row_cost = size_t(x.k) + size_t(x.k / 32) * 3 * sizeof(float);
  // Slabs of equal size in whole tiles (512 rows of k 1536: 3 x 180, not
  // 240 + 240 + 32, whose weights would be read a third time for 32 rows).
  const int64_t most = std::max<int64_t>(kGemmRowTile, int64_t(kSlabBytes / row_cost));
  const int64_t slabs = (x.t + most - 1) / most, even = (x.t + slabs - 1) / slabs;
  const int64_t slab = (even + kGemmRowTile - 1) / kGemmRowTile * kGemmRowTile;
  for (int64_t s0 = 0; s0 < x.t; s0 += slab) {
    const int64_t s1 = std::min(x.t, s0 + slab);
    for (int64_t n = n0; n < pairs_end; n += 2 * kPanelRows) {
      const uint8_t* a = panels + size_t(n) * row_bytes;
      const uint8_t* ahead = n + 4 * kPanelRows <= pairs_end ? a + 2 * group_bytes : nullptr;
      PairAllRows<Format>(a, a + group_bytes, ahead, x, s0, s1, y + n, ldy);
    }
  }
  if (pairs_end < n1) packed::StoredMatmulRows<Format, Dot>(panels, row_bytes, x, pairs_end, n1, y, ldy);
}

}  // namespace gemm

#endif  // HWY_TARGET == HWY_AVX3_DL
