// Multi-row integer matmul for q8_0, q4_0 and q4_1 weights on x86: AVX-512
// VNNI (Highway's AVX3_DL target) and AVX2 with or without AVX-VNNI, the dot
// products in the form of the `Dot` parameter (quant_matmul_x86_dot-inl.h).
// Included by quant_matmul.cc inside those targets' namespaces after
// quant_matmul_vnni-inl.h.
//
// With several activation rows (batched decode, prefill) the per-row kernels of
// quant_matmul_vnni-inl.h are bound by arithmetic, not by memory: every block of
// every (weight row, activation row) pair pays a sign fix-up, an int-to-float
// conversion and two scale steps next to its one vpdpbusd, and the 8 int32 lanes
// of each dot still need a horizontal sum at the end.
//
// Here 8 weight rows are first transposed into a panel held in L1 (like the
// packing step of a BLAS GEMM, but per call, for weights used in place from
// the mmap; weights the CPU backend stored as panels at load, panel_layout.h,
// skip the packing: StoredMatmulRows below): lane j of panel vector c holds
// bytes 4c..4c+3 of row j's block, as unsigned bytes. Broadcasting 4
// activation bytes against such a vector advances the dots of all 8 rows at
// once, so a block costs 8 vpdpbusd with the int32 sums landing one row per
// lane: one conversion and two f32 steps per block serve 8 weight rows instead
// of one, and no horizontal sums remain.
//
// Unsigned weight bytes u = q + z (q8_0: z = 128; q4_0: the nibbles, z = 8;
// q4_1: the nibbles, z = 0 and its min term added in f32) make the dot
// sum(u x) = sum(q x) + z sum(x): the accumulator starts at -z sum(x) (the
// activation block sums are integers), so the integer dot is exact. Plain
// AVX2 (no vpdpbusd) gets the same integers from vpmaddubsw + vpmaddwd: q4
// nibbles as they are, q8_0 as |q| against the activations with q's sign
// (q + 128 would overflow vpmaddubsw's int16 pairs); see MaddBlockDots.
//
// Every kernel here sums each output the same way, block by block
// (MultiplyBlock's f32 steps, chunks of kChunkBlocks added into y in order),
// whatever the tile, row count, dot form or target: a row's result does not
// depend on its batch, and AVX2 gives AVX-512's bits.

// Needs <immintrin.h>, included by quant_matmul.cc at file scope.
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

namespace packed {

constexpr int64_t kChunkBlocks = 64;  // blocks per panel pass: 20 KiB, within L1
constexpr int kRowTile = 4;           // activation rows sharing one load of a block
// Stored panels take 8 activation rows at once where there are 32 vector
// registers; AVX2's 16 hold the accumulators of 4.
constexpr int kStoredRowTile = HWY_TARGET == HWY_AVX3_DL ? 8 : kRowTile;

// One block of 32 values of 8 weight rows.
struct alignas(32) PanelBlock {
  __m256i q[8];  // q[c] lane j: row j's unsigned values 4c..4c+3
  __m256 d;      // f32 scale of each row
  __m256 m;      // q4_1: f32 min of each row
};

// The 32 unsigned values of one weight block, in k order, and its layout.
struct Q8_0Format {
  static constexpr size_t kBlockBytes = 34;
  static constexpr int32_t kZero = 128;
  static constexpr bool kMin = false;
  static constexpr bool kNibbles = false;
  static HWY_INLINE __m256i Values(const uint8_t* blk) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    return _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80)));  // q + 128
  }
  // One block of a stored panel (panel_layout.h): already unsigned and transposed.
  static constexpr size_t kPanelValueBytes = 256;
  static HWY_INLINE void PanelValues(const uint8_t* v, __m256i q[8]) {
    for (int c = 0; c < 8; ++c) q[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32 * c));
  }
};

template <size_t kBytes, int32_t kZeroPoint, bool kHasMin>
struct NibbleFormat {
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int32_t kZero = kZeroPoint;
  static constexpr bool kMin = kHasMin;
  static constexpr bool kNibbles = true;
  static HWY_INLINE __m256i Values(const uint8_t* blk) {
    // Byte i holds value i in its low nibble and value i + 16 in its high one.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBlockBytes - 16));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4), _mm_and_si128(v, low4));
  }
  // One block of a stored panel: vector c holds values 4c.. in its low nibbles
  // and 4c + 16.. in its high ones.
  static constexpr size_t kPanelValueBytes = 128;
  static HWY_INLINE void PanelValues(const uint8_t* v, __m256i q[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32 * c));
      q[c] = _mm256_and_si256(p, low4);
      q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
    }
  }
};
using Q4_0Format = NibbleFormat<18, 8, false>;
using Q4_1Format = NibbleFormat<20, 0, true>;

// q5_0, q5_1 and iq4_nl in q8_0's form (signed values q as q + 128, so plain
// AVX2 takes the |q| / sign path): f16 d at offset 0 (and q5_1's min at 2),
// values 16 bytes before the block's end. Read from the file layout only
// (the CPU backend stores no panels of them).
template <size_t kBytes, int kOffset, bool kHasMin>
struct Q5Format {  // q5_0: code - 16; q5_1: code, plus the min
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int32_t kZero = 128;
  static constexpr bool kMin = kHasMin;
  static constexpr bool kNibbles = false;
  static HWY_INLINE __m256i Values(const uint8_t* blk) {
    uint32_t high;
    std::memcpy(&high, blk + kBytes - 20, 4);
    const __m256i codes = _mm256_or_si256(vnni::Nibbles32(blk + kBytes - 16),
                                          vnni::BitsToBytes(high, 0x10));
    return _mm256_add_epi8(codes, _mm256_set1_epi8(char(128 - kOffset)));
  }
};
using Q5_0Format = Q5Format<22, 16, false>;
using Q5_1Format = Q5Format<24, 0, true>;

struct Iq4NlFormat {
  static constexpr size_t kBlockBytes = 18;
  static constexpr int32_t kZero = 128;
  static constexpr bool kMin = false;
  static constexpr bool kNibbles = false;
  static HWY_INLINE __m256i Values(const uint8_t* blk) {  // the levels + 128
    const __m256i levels = _mm256_xor_si256(vnni::Iq4Levels::Table(), _mm256_set1_epi8(char(0x80)));
    return _mm256_shuffle_epi8(levels, vnni::Nibbles32(blk + 2));
  }
};

// The f16 field at `offset` of the same block of 8 rows, as f32 lanes.
HWY_INLINE __m256 GatherF16(const uint8_t* blk, size_t row_bytes, size_t offset) {
  alignas(16) uint16_t h[kPanelRows];
  for (int j = 0; j < kPanelRows; ++j) std::memcpy(&h[j], blk + j * row_bytes + offset, 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

// 8x8 transpose of 32-bit lanes: out[c] lane j = in[j] lane c.
HWY_INLINE void Transpose8x8(const __m256i in[8], __m256i out[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(in[i], in[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    out[c] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x20);
    out[c + 4] = _mm256_permute2x128_si256(u[c], u[c + 4], 0x31);
  }
}

// How many panels ahead of the one being multiplied its rows are prefetched.
constexpr int64_t kAhead = 3;

// Streams a later panel's rows (contiguous bytes) into cache while the
// current panel is multiplied, a few lines per block step, so that the misses
// spread evenly over the panel's arithmetic and the pack of that panel finds
// its rows in cache.
struct PanelPrefetcher {
  const uint8_t* next = nullptr;  // next line to fetch
  const uint8_t* end = nullptr;   // end of the rows to fetch (not past this task's rows)
  int64_t lines_per_step = 0;

  HWY_INLINE void Step() {
    for (int64_t i = 0; i < lines_per_step && next < end; ++i, next += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
  }
};

// Blocks [b0, b0 + nb) of the 8 rows at w into `panel`.
template <class Format>
HWY_INLINE void PackPanel(const uint8_t* w, size_t row_bytes, int64_t b0, int64_t nb,
                          PanelBlock* panel) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + size_t(b0 + b) * Format::kBlockBytes;
    __m256i rows[kPanelRows];
    for (int j = 0; j < kPanelRows; ++j) rows[j] = Format::Values(blk + j * row_bytes);
    Transpose8x8(rows, panel[b].q);
    panel[b].d = GatherF16(blk, row_bytes, 0);
    if constexpr (Format::kMin) panel[b].m = GatherF16(blk, row_bytes, 2);
  }
}

// f(r0, R) for the activation rows in tiles of up to kRowTile, R a compile-time
// std::integral_constant so that each tile size gets its own unrolled kernel.
template <class F>
HWY_INLINE void ForEachRowTile(int64_t t, const F& f) {
  for (int64_t r0 = 0; r0 < t; r0 += kRowTile) {
    switch (std::min<int64_t>(kRowTile, t - r0)) {
      case 1: f(r0, std::integral_constant<int, 1>()); break;
      case 2: f(r0, std::integral_constant<int, 2>()); break;
      case 3: f(r0, std::integral_constant<int, 3>()); break;
      default: f(r0, std::integral_constant<int, kRowTile>()); break;
    }
  }
}

// Lane j = the exact integer dot of weight row j's block (its signed values:
// the zero point taken out) with the activation block xq (its sum: xsum).
template <class Format, class Dot>
HWY_INLINE __m256i VnniBlockDot(const __m256i q[8], const int8_t* xq, int32_t xsum) {
  // Two chains of four, so that four rows keep 8 vpdpbusd in flight.
  __m256i even = _mm256_set1_epi32(-Format::kZero * xsum), odd = _mm256_setzero_si256();
  for (int c = 0; c < 8; c += 2) {
    even = Dot::AddBroadcast(even, q[c], xq + 4 * c);
    odd = Dot::AddBroadcast(odd, q[c + 1], xq + 4 * c + 4);
  }
  return _mm256_add_epi32(even, odd);
}

// The same for R activation blocks on plain AVX2, a weight vector at a time
// for all R (its preparation shared).
template <class Format, int R>
HWY_INLINE void MaddBlockDots(const __m256i q[8], const int8_t* const xq[R],
                              const int32_t xsum[R], __m256i dots[R]) {
  using Dot = x86::MaddDot;
  if constexpr (Format::kNibbles) {
    // The 8 vectors' pairs summed as int16 first: |sum| <= 8 x 2 x 15 x 127 < 2^15.
    __m256i pairs[R];
    for (int c = 0; c < 8; ++c) {
      for (int r = 0; r < R; ++r) {
        const __m256i p = Dot::Pairs(q[c], x86::Broadcast4(xq[r] + 4 * c));
        pairs[r] = c == 0 ? p : _mm256_add_epi16(pairs[r], p);
        x86::KeepChain(pairs[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      dots[r] = _mm256_add_epi32(Dot::Quads(pairs[r]), _mm256_set1_epi32(-Format::kZero * xsum[r]));
    }
  } else {
    // q8_0: |q| (<= 128) times the activations with q's sign, q = u - 128.
    // (Splitting u into nibbles, each summed as int16 like q4's, is no faster
    // here: kernel_bench q8_0 k576_n1536 hot t128 2107 vs 2139 us, t1 19 vs 26.)
    for (int c = 0; c < 8; ++c) {
      const __m256i signed_q = _mm256_xor_si256(q[c], _mm256_set1_epi8(char(0x80)));
      const __m256i magnitude = _mm256_abs_epi8(signed_q);
      for (int r = 0; r < R; ++r) {
        const __m256i x4 = _mm256_sign_epi8(x86::Broadcast4(xq[r] + 4 * c), signed_q);
        const __m256i d = Dot::Quads(Dot::Pairs(magnitude, x4));
        dots[r] = c == 0 ? d : _mm256_add_epi32(dots[r], d);
      }
    }
  }
}

// acc[r] += block b of 8 weight rows (q, scales d, q4_1 mins m) against
// activation rows r0 + r: the f32 steps every q8_0 / q4_0 / q4_1 kernel
// shares, so that their results agree bit for bit.
template <class Format, class Dot, int R>
HWY_INLINE void MultiplyBlock(const __m256i q[8], __m256 d, __m256 m,
                              const QuantizedActivations& x, int64_t r0, int64_t b,
                              __m256 acc[R]) {
  const int64_t x_blocks = x.k / 32;
  __m256i dots[R];
  if constexpr (!x86::kIsVnni<Dot>) {
    const int8_t* xq[R];
    int32_t xsum[R];
    for (int r = 0; r < R; ++r) {
      const int64_t xb = (r0 + r) * x_blocks + b;
      xq[r] = x.qs + xb * 32;
      xsum[r] = x.sum[xb];
    }
    MaddBlockDots<Format, R>(q, xq, xsum, dots);
  }
  for (int r = 0; r < R; ++r) {
    const int64_t xb = (r0 + r) * x_blocks + b;
    // With vpdpbusd row by row: one row's chains live at a time (8 rows fill
    // AVX3_DL's 32 registers).
    if constexpr (x86::kIsVnni<Dot>) dots[r] = VnniBlockDot<Format, Dot>(q, x.qs + xb * 32, x.sum[xb]);
    const __m256 dot = _mm256_cvtepi32_ps(dots[r]);
    acc[r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(d, _mm256_set1_ps(x.d[xb])), acc[r]);
    if constexpr (Format::kMin) acc[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(x.s[xb]), acc[r]);
  }
}

// y[r0 + r][0..8) = acc[r], or += when `accumulate` (the chunks after the first).
template <int R>
HWY_INLINE void StoreRows(const __m256 acc[R], bool accumulate, int64_t r0, float* y,
                          int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    float* out = y + (r0 + r) * ldy;
    _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(acc[r], _mm256_loadu_ps(out)) : acc[r]);
  }
}

// y[r0 + r][0..8) (+)= the panel's blocks [b0, b0 + nb) against R activation
// rows, a prefetch step per block.
template <class Format, class Dot, int R>
HWY_INLINE void PanelRows(const PanelBlock* panel, const QuantizedActivations& x, int64_t r0,
                          int64_t b0, int64_t nb, bool accumulate, PanelPrefetcher& prefetch,
                          float* y, int64_t ldy) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.Step();
    const PanelBlock& blk = panel[b];
    __m256i q[8];
    for (int c = 0; c < 8; ++c) q[c] = _mm256_load_si256(&blk.q[c]);
    MultiplyBlock<Format, Dot, R>(q, blk.d, blk.m, x, r0, b0 + b, acc);
  }
  StoreRows<R>(acc, accumulate, r0, y, ldy);
}

// Rows [n0, n1) of y for every activation row, (n1 - n0) a multiple of 8.
template <class Format, class Dot>
void MatmulRows(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x, int64_t n0,
                int64_t n1, float* y, int64_t ldy) {
  const int64_t x_blocks = x.k / 32;
  const int64_t passes = (x.t + kRowTile - 1) / kRowTile;
  const size_t panel_bytes = kPanelRows * row_bytes;
  const uint8_t* rows_end = w + size_t(n1) * row_bytes;
  // Prefetch into L2, kAhead panels ahead (the first kAhead panels come by the
  // hardware prefetcher alone). kernel_bench, q8_0 k576_n1536 cold, one thread
  // (us): t4 138 -> 60, t8 134 -> 90 against one panel ahead into L1, per row
  // blocks as they are packed.
  const int64_t lines = int64_t((panel_bytes + 63) / 64);
  const int64_t steps = passes * x_blocks;
  PanelPrefetcher prefetch{w + size_t(n0) * row_bytes + kAhead * panel_bytes, rows_end,
                           (lines + steps - 1) / steps};
  PanelBlock panel[kChunkBlocks];
  for (int64_t n = n0; n < n1; n += kPanelRows) {
    const uint8_t* rows = w + size_t(n) * row_bytes;
    for (int64_t b0 = 0; b0 < x_blocks; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, x_blocks - b0);
      PackPanel<Format>(rows, row_bytes, b0, nb, panel);
      const bool accumulate = b0 > 0;
      ForEachRowTile(x.t, [&](int64_t r0, auto rows) HWY_ATTR {
        PanelRows<Format, Dot, rows()>(panel, x, r0, b0, nb, accumulate, prefetch, y + n, ldy);
      });
    }
    // Stay exactly kAhead panels ahead whatever the rounding of lines per step.
    prefetch.next = std::max(prefetch.next, rows + (kAhead + 1) * panel_bytes);
  }
}

// ---- Weights stored as panels at load (panel_layout.h): nothing to pack, one
// kernel for every row count (decode included), the same arithmetic as above.

// y[r0 + r][0..8) for R activation rows from one stored group of 8 weight rows;
// block b also prefetches its share of the group at `ahead` (null: none).
// One row (decode of one sequence) is bound by memory and takes a group in
// ~0.1 us: its prefetches go to L1. With more rows a group takes several
// times longer and the prefetched groups would sit in L1 beside the current
// group and the activations, evicting them: theirs go to L2, from where the
// hardware's L1 prefetcher brings them. kernel_bench q8_0 cold, one thread,
// us, all to L1 -> R > 1 to L2: k576_n1536 t8 78-82 -> 61-67, t4 48-49 ->
// 43-45; k1536_n576 t8 93-94 -> 62-66; k576_n49152 t8 2230-2307 -> 1769-1832.
// (t1 to L2 instead: k576_n1536 41 -> 47-50, the reason R = 1 keeps L1.)
template <class Format, class Dot, int R>
HWY_INLINE void StoredPanelRows(const uint8_t* group, const uint8_t* ahead,
                                const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  const int64_t nb = x.k / 32;
  constexpr size_t kShare = kPanelRows * Format::kBlockBytes;  // a group's bytes per block
  constexpr auto kPrefetchTo = R == 1 ? _MM_HINT_T0 : _MM_HINT_T1;
  const uint8_t* values = group;
  const uint8_t* scales = values + size_t(nb) * Format::kPanelValueBytes;
  const uint8_t* mins = scales + size_t(nb) * kPanelRows * 2;
  for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = b0; b < std::min(nb, b0 + kChunkBlocks); ++b) {
      if (ahead != nullptr) {
        for (size_t line = 0; line < kShare; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(ahead + size_t(b) * kShare + line), kPrefetchTo);
      }
      __m256i q[8];
      Format::PanelValues(values + size_t(b) * Format::kPanelValueBytes, q);
      auto f16x8 = [&](const uint8_t* p) HWY_ATTR {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + b * 16)));
      };
      const __m256 d = f16x8(scales);
      const __m256 m = Format::kMin ? f16x8(mins) : d;
      MultiplyBlock<Format, Dot, R>(q, d, m, x, r0, b, acc);
    }
    StoreRows<R>(acc, b0 > 0, r0, y, ldy);
  }
}

// Rows [n0, n1) of y for every activation row; n0 and n1 multiples of 8,
// `panels` the stored layout of the whole matrix.
template <class Format, class Dot>
void StoredMatmulRows(const uint8_t* panels, size_t row_bytes, const QuantizedActivations& x,
                      int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const size_t group_bytes = kPanelRows * row_bytes;
  for (int64_t n = n0; n < n1; n += kPanelRows) {
    const uint8_t* group = panels + size_t(n) * row_bytes;
    const bool prefetch = n + (kAhead + 1) * kPanelRows <= n1;
    const uint8_t* ahead = prefetch ? group + kAhead * group_bytes : nullptr;
    // Tiles of 8 activation rows while there are 8 (AVX3_DL): each block's
    // values are loaded once for all of them (kernel_bench q8_0 t8 cold 92 ->
    // 84 us against two tiles of 4).
    // Only the first tile prefetches: the later ones find the group in cache.
    int64_t r0 = 0;
    if constexpr (kStoredRowTile > kRowTile) {
      for (; r0 + kStoredRowTile <= x.t; r0 += kStoredRowTile) {
        StoredPanelRows<Format, Dot, kStoredRowTile>(group, r0 == 0 ? ahead : nullptr, x, r0,
                                                     y + n, ldy);
      }
    }
    ForEachRowTile(x.t - r0, [&](int64_t r, auto rows) HWY_ATTR {
      StoredPanelRows<Format, Dot, rows()>(group, r0 + r == 0 ? ahead : nullptr, x, r0 + r,
                                           y + n, ldy);
    });
  }
}

// ---- The same arithmetic one weight row at a time, for 1-3 activation rows
// (decode), where packing costs more than it saves. Every output is computed
// exactly as PanelRows computes it: the block's integer dot (exact), then
// acc = fma(float(dot), dw * dx, acc) block by block (q4_1 then adds m * s),
// chunks of kChunkBlocks summed into y in order. So a row's result does not
// depend on how many rows share the step or which kernel ran it: a sequence
// decodes to the same tokens alone and in a batch.

// The four int32 lane-sums of d[0..3] (8 lanes each), as 4 lanes.
HWY_INLINE __m128i SumLanes4(const __m256i d[4]) {
  const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(d[0], d[1]),
                                      _mm256_unpackhi_epi32(d[0], d[1]));
  const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(d[2], d[3]),
                                      _mm256_unpackhi_epi32(d[2], d[3]));
  const __m256i t = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
  return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}

// The f16 field at `offset` of the same block of rows[0..3], as 4 f32 lanes.
HWY_INLINE __m128 GatherF16x4(const uint8_t* const rows[4], size_t block_offset, size_t offset) {
  auto bits = [&](int j) {
    uint16_t h;
    std::memcpy(&h, rows[j] + block_offset + offset, 2);
    return int(h);
  };
  __m128i h = _mm_cvtsi32_si128(bits(0));
  h = _mm_insert_epi16(h, bits(1), 1);
  h = _mm_insert_epi16(h, bits(2), 2);
  h = _mm_insert_epi16(h, bits(3), 3);
  return _mm_cvtph_ps(h);
}

// One weight block (32 values as Format::Values gives them) prepared for a
// full-vector dot with any number of activation blocks: Lanes(xv)'s int32
// lanes sum to the block's dot with xv plus kZero x the sum of xv.
template <class Format, class Dot,
          bool kSignMagnitude = !Format::kNibbles && std::is_same_v<Dot, x86::MaddDot>>
struct RowBlock {
  static constexpr int32_t kZero = Format::kZero;
  __m256i u;
  explicit HWY_INLINE RowBlock(__m256i values) : u(values) {}
  HWY_INLINE __m256i Lanes(__m256i xv) const { return Dot::Add(_mm256_setzero_si256(), u, xv); }
};
// q8_0 (and the other q + 128 formats) on plain AVX2: |q| against the
// activations with q's sign (see MaddBlockDots).
template <class Format, class Dot>
struct RowBlock<Format, Dot, true> {
  static constexpr int32_t kZero = 0;
  __m256i signed_q, magnitude;
  explicit HWY_INLINE RowBlock(__m256i values)
      : signed_q(_mm256_xor_si256(values, _mm256_set1_epi8(char(0x80)))),
        magnitude(_mm256_abs_epi8(signed_q)) {}
  HWY_INLINE __m256i Lanes(__m256i xv) const {
    using D = x86::MaddDot;
    return D::Quads(D::Pairs(magnitude, _mm256_sign_epi8(xv, signed_q)));
  }
};

// y[r0 + r][0..nw) for R activation rows and nw <= 4 weight rows at w (lanes
// past nw repeat the last row and are not stored); rows before `rows_end` may
// be prefetched, two groups of four ahead.
template <class Format, class Dot, int R>
HWY_INLINE void RowTile(const uint8_t* w, int nw, const uint8_t* rows_end, size_t row_bytes,
                        const QuantizedActivations& x, int64_t r0, float* y, int64_t ldy) {
  constexpr size_t kBytes = Format::kBlockBytes;
  constexpr int kPrefetchLines = int((4 * kBytes + 63) / 64) + 1;
  const int64_t x_blocks = x.k / 32;
  const uint8_t* rows[4];
  for (int j = 0; j < 4; ++j) rows[j] = w + size_t(std::min(j, nw - 1)) * row_bytes;
  const uint8_t* prefetch = w + 2 * 4 * row_bytes;
  for (int64_t b0 = 0; b0 < x_blocks; b0 += kChunkBlocks) {
    const int64_t b1 = std::min(x_blocks, b0 + kChunkBlocks);
    __m128 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = b0; b < b1; ++b) {
      for (int i = 0; i < kPrefetchLines; ++i) {
        const uint8_t* line = prefetch + b * 4 * kBytes + 64 * i;
        if (line < rows_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
      }
      const size_t offset = size_t(b) * kBytes;
      using Block = RowBlock<Format, Dot>;
      const Block u[4] = {Block(Format::Values(rows[0] + offset)),
                          Block(Format::Values(rows[1] + offset)),
                          Block(Format::Values(rows[2] + offset)),
                          Block(Format::Values(rows[3] + offset))};
      const __m128 dw = GatherF16x4(rows, offset, 0);
      __m128 mw;
      if constexpr (Format::kMin) mw = GatherF16x4(rows, offset, 2);
      for (int r = 0; r < R; ++r) {
        const int64_t xb = (r0 + r) * x_blocks + b;
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + xb * 32));
        __m256i d[4];
        for (int j = 0; j < 4; ++j) d[j] = u[j].Lanes(xv);
        const __m128i dot =
            _mm_add_epi32(SumLanes4(d), _mm_set1_epi32(-Block::kZero * x.sum[xb]));
        acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, _mm_set1_ps(x.d[xb])), acc[r]);
        if constexpr (Format::kMin) acc[r] = _mm_fmadd_ps(mw, _mm_set1_ps(x.s[xb]), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      alignas(16) float lanes[4];
      _mm_store_ps(lanes, acc[r]);
      float* out = y + (r0 + r) * ldy;
      for (int j = 0; j < nw; ++j) out[j] = b0 > 0 ? lanes[j] + out[j] : lanes[j];
    }
  }
}

// Rows [n0, n1) of y, four weight rows at a time, for every activation row.
template <class Format, class Dot>
void RowMatmulRows(const uint8_t* w, size_t row_bytes, const QuantizedActivations& x, int64_t n0,
                   int64_t n1, float* y, int64_t ldy) {
  const uint8_t* rows_end = w + size_t(n1) * row_bytes;
  for (int64_t n = n0; n < n1; n += 4) {
    const int nw = int(std::min<int64_t>(4, n1 - n));
    const uint8_t* rows = w + size_t(n) * row_bytes;
    ForEachRowTile(x.t, [&](int64_t r0, auto tile) HWY_ATTR {
      RowTile<Format, Dot, tile()>(rows, nw, rows_end, row_bytes, x, r0, y + n, ldy);
    });
  }
}

}  // namespace packed

#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
