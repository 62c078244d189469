// The tile loop of quant_matmul_arm-inl.h, included there twice: in namespace
// arm::dot compiled with dotprod (every activation row through sdot), and in
// arm::i8mm compiled with i8mm as well (ANYMOE_ARM_PAIRS: activation rows in
// pairs through smmla), so that no code built for i8mm runs on a CPU without
// it. No include guard, on purpose.

// y[r0 + r][0..nw) (+)= the chunk's blocks [b0, b0 + nb) of the 4 weight rows
// against R activation rows (the first R & ~1 of them in pairs with i8mm).
template <class Format, int R>
HWY_INLINE void Tile(const uint8_t* const rows[kRows], int nw, const ChunkScales& s,
                     const QuantizedActivations& x, int64_t r0, int64_t b0, int64_t nb, float* y,
                     int64_t ldy) {
  constexpr bool kSplit = Format::kHalfScales;
  const int64_t x_blocks = x.k / 32;
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t b = b0 + i;
    BlockValues w;
    Format::Values(rows, b, w);
    int32x4_t lo[R], hi[R];
    int r = 0;
#if ANYMOE_ARM_PAIRS
    if constexpr (R >= 2) {
      PairedValues p;
      Pair(w, p);
      for (; r + 2 <= R; r += 2) {
        const int8_t* xq = x.qs + ((r0 + r) * x_blocks + b) * 32;
        DotTwoRows<kSplit>(p, xq, xq + x.k, lo[r], hi[r], lo[r + 1], hi[r + 1]);
      }
    }
#endif
    for (; r < R; ++r) DotOneRow<kSplit>(w, x.qs + ((r0 + r) * x_blocks + b) * 32, lo[r], hi[r]);
    // The f32 steps every target shares (see the top of quant_matmul_arm-inl.h).
    for (r = 0; r < R; ++r) {
      const int64_t xb = (r0 + r) * x_blocks + b;
      int32x4_t dot = lo[r];
      if constexpr (kSplit) dot = vmlaq_s32(vmulq_s32(dot, s.scale_lo[i]), hi[r], s.scale_hi[i]);
      if constexpr (Format::kZero != 0) {
        dot = vaddq_s32(dot, vdupq_n_s32(-Format::kZero * x.sum[xb]));
      }
      acc[r] = vfmaq_f32(acc[r], vcvtq_f32_s32(dot), vmulq_n_f32(s.dw[i], x.d[xb]));
      if constexpr (Format::kMin) acc[r] = vfmaq_n_f32(acc[r], s.cw[i], x.s[xb]);
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(16) float lanes[kRows];
    vst1q_f32(lanes, acc[r]);
    float* out = y + (r0 + r) * ldy;
    for (int j = 0; j < nw; ++j) out[j] = b0 > 0 ? out[j] + lanes[j] : lanes[j];
  }
}

// Rows [n0, n1) of y for every activation row: 4 weight rows at a time, each
// chunk of their blocks against all activation rows, 4 at a time.
template <class Format>
void MatmulRows(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x, int64_t n0,
                int64_t n1, float* y, int64_t ldy) {
  const int64_t x_blocks = x.k / 32;
  ChunkScales scales;
  for (int64_t n = n0; n < n1; n += kRows) {
    const int nw = int(std::min<int64_t>(kRows, n1 - n));
    const uint8_t* rows[kRows];  // rows past nw repeat the last one, unstored
    for (int j = 0; j < kRows; ++j) rows[j] = w + size_t(n + std::min(j, nw - 1)) * row_bytes;
    for (int64_t b0 = 0; b0 < x_blocks; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, x_blocks - b0);
      Format::Scales(rows, b0, nb, scales);
      float* out = y + n;
      for (int64_t r0 = 0; r0 < x.t; r0 += 4) {
        switch (std::min<int64_t>(4, x.t - r0)) {
          case 1: Tile<Format, 1>(rows, nw, scales, x, r0, b0, nb, out, ldy); break;
          case 2: Tile<Format, 2>(rows, nw, scales, x, r0, b0, nb, out, ldy); break;
          case 3: Tile<Format, 3>(rows, nw, scales, x, r0, b0, nb, out, ldy); break;
          default: Tile<Format, 4>(rows, nw, scales, x, r0, b0, nb, out, ldy); break;
        }
      }
    }
  }
}
