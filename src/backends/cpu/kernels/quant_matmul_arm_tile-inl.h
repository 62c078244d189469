// The tile loop of quant_matmul_arm-inl.h, included there twice: in namespace
// arm::dot compiled with dotprod (every activation row through sdot), and in
// arm::i8mm compiled with i8mm as well (ANYMOE_ARM_PAIRS: activation rows in
// pairs through smmla), so that no code built for i8mm runs on a CPU without
// it. No include guard, on purpose.

// y[r0 + r][0..nw) = acc[r] (+= for the chunks after the first).
template <int R>
HWY_INLINE void StoreTile(const float32x4_t acc[R], int nw, bool accumulate, int64_t r0, float* y,
                          int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    alignas(16) float lanes[kRows];
    vst1q_f32(lanes, acc[r]);
    float* out = y + (r0 + r) * ldy;
    for (int j = 0; j < nw; ++j) out[j] = accumulate ? out[j] + lanes[j] : lanes[j];
  }
}

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
  for (int64_t i0 = 0; i0 < nb; i0 += Format::kStep) {
    BlockValues ws[Format::kStep];
    Format::Load(rows, b0 + i0, ws);
    for (int step = 0; step < Format::kStep; ++step) {
      const int64_t i = i0 + step, b = b0 + i;
      const BlockValues& w = ws[step];
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
      for (r = 0; r < R; ++r) {
        int32x4_t dot = lo[r];
        if constexpr (kSplit) dot = vmlaq_s32(vmulq_s32(dot, s.scale_lo[i]), hi[r], s.scale_hi[i]);
        const float32x4_t cw = Format::kMin ? s.cw[i] : s.dw[i];  // (cw unused without a min)
        acc[r] = Step<Format>(acc[r], dot, s.dw[i], cw, x, (r0 + r) * x_blocks + b);
      }
    }
  }
  StoreTile<R>(acc, nw, b0 > 0, r0, y, ldy);
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
      ForEachRowTile<4>(x.t, [&](int64_t r0, auto rows_in_tile) {
        Tile<Format, rows_in_tile()>(rows, nw, scales, x, r0, b0, nb, out, ldy);
      });
    }
  }
}

// ---- weights stored as panels

// y[r0 + r][0..8) (+)= the chunk's blocks [b0, b0 + nb) of a stored group of
// 8 rows against R activation rows.
template <class Format, int R>
HWY_INLINE void PanelTile(const uint8_t* values, const uint8_t* scales, const uint8_t* mins,
                          const QuantizedActivations& x, int64_t r0, int64_t b0, int64_t nb,
                          float* y, int64_t ldy) {
  const int64_t x_blocks = x.k / 32;
  float32x4_t acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);
  for (int64_t b = b0; b < b0 + nb; ++b) {
    PairedValues p[2];
    Format::Values(values + size_t(b) * Format::kValueBytes, 0, p[0]);
    Format::Values(values + size_t(b) * Format::kValueBytes, 1, p[1]);
    auto f16x8 = [&](const uint8_t* f, float32x4_t out[2]) {
      const float16x8_t h = vreinterpretq_f16_u16(
          vld1q_u16(reinterpret_cast<const uint16_t*>(f + size_t(b) * 2 * kPanelRows)));
      out[0] = vcvt_f32_f16(vget_low_f16(h));
      out[1] = vcvt_high_f32_f16(h);
    };
    float32x4_t dw[2], cw[2];
    f16x8(scales, dw);
    if constexpr (Format::kMin) {
      f16x8(mins, cw);
    } else {
      cw[0] = dw[0], cw[1] = dw[1];  // unused
    }
    int32x4_t dot[R][2];
    int r = 0;
#if ANYMOE_ARM_PAIRS
    int32x4_t unused0, unused1;
    for (; r + 2 <= R; r += 2) {
      const int8_t* xq = x.qs + ((r0 + r) * x_blocks + b) * 32;
      for (int h = 0; h < 2; ++h)
        DotTwoRows<false>(p[h], xq, xq + x.k, dot[r][h], unused0, dot[r + 1][h], unused1);
    }
#endif
    for (; r < R; ++r) PanelDotOneRow(p, x.qs + ((r0 + r) * x_blocks + b) * 32, dot[r]);
    for (r = 0; r < R; ++r) {
      const int64_t xb = (r0 + r) * x_blocks + b;
      for (int h = 0; h < 2; ++h) {
        const int32x4_t d = Format::kNibbles ? vshrq_n_s32(dot[r][h], 4) : dot[r][h];
        acc[r][h] = Step<Format>(acc[r][h], d, dw[h], cw[h], x, xb);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    float32x4_t half[R];
    for (int r = 0; r < R; ++r) half[r] = acc[r][h];
    StoreTile<R>(half, kRows, b0 > 0, r0, y + 4 * h, ldy);
  }
}

// Activation rows per panel tile: with sdot alone, 2 (the 16 weight vectors of
// a block, 4 duplicated activation parts and 2 x 2 accumulators fill the 32
// registers; 4 rows spilled: kernel instructions per 32-weight block, q8_0 t8,
// 7.08 -> see the commit); with smmla, 4 (2 pairs).
constexpr int kPanelTile = ANYMOE_ARM_PAIRS ? 4 : 2;

// Rows [n0, n1) of y (multiples of 8) for every activation row, from `panels`,
// the stored layout of the whole matrix.
template <class Format>
void StoredMatmulRows(const uint8_t* panels, size_t row_bytes, const QuantizedActivations& x,
                      int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const int64_t x_blocks = x.k / 32;
  for (int64_t n = n0; n < n1; n += kPanelRows) {
    const uint8_t* values = panels + size_t(n) * row_bytes;
    const uint8_t* scales = values + size_t(x_blocks) * Format::kValueBytes;
    const uint8_t* mins = scales + size_t(x_blocks) * 2 * kPanelRows;
    for (int64_t b0 = 0; b0 < x_blocks; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, x_blocks - b0);
      ForEachRowTile<kPanelTile>(x.t, [&](int64_t r0, auto rows_in_tile) {
        PanelTile<Format, rows_in_tile()>(values, scales, mins, x, r0, b0, nb, y + n, ldy);
      });
    }
  }
}
