// Integer matmul for GGUF block weights on 64-bit ARM with the dot-product
// extension (sdot) and, from two activation rows on, the int8 matrix multiply
// (i8mm: smmla), included by quant_matmul.cc inside the namespaces of the NEON
// and SVE targets (SVE, SVE2, SVE_256, SVE2_128). Highway 1.0.3 has no target
// for either extension: the kernels are NEON code around those two
// instructions, taken only where the selected CPU target allows them
// (cpu_target.h). SVE targets run the same 128-bit code: every SVE CPU has
// NEON, and an SVE dot over one weight row needs a horizontal sum per block
// that costs what the wider vector saves.
//
// Weights in place in the file layout: four rows at a time against up to four
// activation rows (every type). Weights stored as panels at load (q8_0 / q4_0 /
// q4_1, panel_layout.h): a group of 8 rows, in pairs, at a time. Every output
// is computed the same way whatever kernel takes it, so all of these targets
// give the same bits, a row's result does not depend on its batch, and q8_0 /
// q4_0 / q4_1 equal the AVX-512 VNNI kernels' bits: per block b, with the
// block's integer dot idot (exact in int32, and in f32: below 2^24), the f32
// scale dw and, for q4_1 / q4_k, the min term cw,
//   acc = fma(float(idot), dw * dx[b], acc);  acc = fma(cw, s[b], acc)
// over chunks of 64 blocks, each chunk's acc added to y in order. Per type:
//   q8_0 idot = sum q x              dw = d
//   q4_0 idot = sum (nibble - 8) x   dw = d
//   q4_1 idot = sum nibble x         dw = d             cw = m
//   q4_k idot = sum nibble x         dw = d * scale     cw = -dmin * min
//   q6_k idot = sum over the two halves of 16: scale_half * sum (q - 32) x,
//        dw = d
// (d * scale and dmin * min are exact in f32: an f16 times a 6-bit integer.)
//
// How the integer dots are formed is free, since they are exact: sdot gives
// partial sums per weight row, added pairwise (addp) into one lane per row;
// smmla multiplies 8 bytes of two weight rows by 8 bytes of two activation
// rows (a 2x2 block of dots), rows interleaved 8 bytes at a time (the panels
// are stored so).

// Whether this target has these kernels: re-decided for each target, since
// quant_matmul.cc (and so this file) is compiled once per target.
#undef ANYMOE_ARM_DOT_KERNELS
#if HWY_ARCH_ARM_A64 && (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_SVE ||       \
                         HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 || \
                         HWY_TARGET == HWY_SVE2_128)
#define ANYMOE_ARM_DOT_KERNELS 1
#else
#define ANYMOE_ARM_DOT_KERNELS 0
#endif

#if ANYMOE_ARM_DOT_KERNELS

// The code below is compiled for this Highway target plus dotprod (plus i8mm
// for the pair kernels), as armv8.2-a, the first architecture with either: a
// CPU that reports them implements it. Only TryMatmulRows, compiled for the
// plain target, runs before the selected CPU target is checked.
#if HWY_TARGET == HWY_NEON
#define ANYMOE_ARM_BASE "arch=armv8.2-a+crypto"
#elif HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE_256
#define ANYMOE_ARM_BASE "arch=armv8.2-a+sve"
#else
#define ANYMOE_ARM_BASE "arch=armv8.2-a+sve2-aes"
#endif

HWY_PUSH_ATTRIBUTES(ANYMOE_ARM_BASE "+dotprod")
namespace arm {

constexpr int kRows = 4;             // weight rows per tile: one f32 lane each
constexpr int64_t kChunkBlocks = 64;  // blocks per accumulator run (as the VNNI kernels)

// Per block of a chunk, the f32 factors of the 4 weight rows (lane j: row j)
// and, for q6_k, the integer scales of the block's two halves.
struct ChunkScales {
  float32x4_t dw[kChunkBlocks];
  float32x4_t cw[kChunkBlocks];
  int32x4_t scale_lo[kChunkBlocks];
  int32x4_t scale_hi[kChunkBlocks];
};

// One block's 32 signed int8 weights of each of the 4 rows: k 0-15 in lo, 16-31 in hi.
struct BlockValues {
  int8x16_t lo[kRows], hi[kRows];
};

HWY_INLINE float32x4_t GatherF16(const uint8_t* const rows[kRows], size_t offset) {
  uint16x4_t h = vdup_n_u16(0);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(rows[0] + offset), h, 0);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(rows[1] + offset), h, 1);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(rows[2] + offset), h, 2);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(rows[3] + offset), h, 3);
  return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

// q8_0 / q4_0 / q4_1: 32 values with an f16 scale d at 0 (and, q4_1, a min at 2).
template <size_t kBytes, int32_t kZeroPoint, bool kHasMin>
struct SimpleFormat {
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int32_t kZero = kZeroPoint;  // subtracted as kZero * sum(x)
  static constexpr bool kMin = kHasMin;
  static constexpr bool kHalfScales = false;
  static constexpr int kStep = 1;  // blocks unpacked at a time
  static HWY_INLINE void Scales(const uint8_t* const rows[kRows], int64_t b0, int64_t nb,
                                ChunkScales& s) {
    const uint8_t* p[kRows];
    for (int j = 0; j < kRows; ++j) p[j] = rows[j] + size_t(b0) * kBytes;
    for (int64_t i = 0; i < nb; ++i) {
      s.dw[i] = GatherF16(p, 0);
      if constexpr (kHasMin) s.cw[i] = GatherF16(p, 2);
      for (int j = 0; j < kRows; ++j) p[j] += kBytes;
    }
  }
};

struct Q8_0Format : SimpleFormat<34, 0, false> {
  static HWY_INLINE void Load(const uint8_t* const rows[kRows], int64_t b, BlockValues* out) {
    BlockValues& v = out[0];
    for (int j = 0; j < kRows; ++j) {
      const int8_t* q = reinterpret_cast<const int8_t*>(rows[j] + size_t(b) * kBlockBytes + 2);
      v.lo[j] = vld1q_s8(q);
      v.hi[j] = vld1q_s8(q + 16);
    }
  }
};

// q4_0 / q4_1: byte i holds value i in its low nibble and value i + 16 in its high one.
template <size_t kBytes, int32_t kZeroPoint, bool kHasMin>
struct NibbleFormat : SimpleFormat<kBytes, kZeroPoint, kHasMin> {
  static HWY_INLINE void Load(const uint8_t* const rows[kRows], int64_t b, BlockValues* out) {
    BlockValues& v = out[0];
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    for (int j = 0; j < kRows; ++j) {
      const uint8x16_t q = vld1q_u8(rows[j] + size_t(b) * kBytes + kBytes - 16);
      v.lo[j] = vreinterpretq_s8_u8(vandq_u8(q, low4));
      v.hi[j] = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    }
  }
};
using Q4_0Format = NibbleFormat<18, 8, false>;
using Q4_1Format = NibbleFormat<20, 0, true>;

// q4_k: super-blocks of 8 blocks (144 bytes: d, dmin, 12 bytes of 6-bit scales
// and mins, 128 bytes of nibbles); block i takes the low (even i) or high
// nibbles of bytes 32 (i / 2) .. + 32.
struct Q4_KFormat {
  static constexpr size_t kSuperBytes = 144;
  static constexpr int32_t kZero = 0;
  static constexpr bool kMin = true;
  static constexpr bool kHalfScales = false;
  static HWY_INLINE void Scales(const uint8_t* const rows[kRows], int64_t b0, int64_t nb,
                                ChunkScales& s) {
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
      const uint8_t* super[kRows];
      for (int j = 0; j < kRows; ++j) super[j] = rows[j] + size_t(b0 / 8 + sb) * kSuperBytes;
      // d and dmin of the 4 rows: lanes (d, dmin) of row j at 2j, 2j + 1.
      uint32x4_t dd = vdupq_n_u32(0);
      dd = vld1q_lane_u32(reinterpret_cast<const uint32_t*>(super[0]), dd, 0);
      dd = vld1q_lane_u32(reinterpret_cast<const uint32_t*>(super[1]), dd, 1);
      dd = vld1q_lane_u32(reinterpret_cast<const uint32_t*>(super[2]), dd, 2);
      dd = vld1q_lane_u32(reinterpret_cast<const uint32_t*>(super[3]), dd, 3);
      const uint16x8_t h = vreinterpretq_u16_u32(dd);
      const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(vuzp1q_u16(h, h))));
      const float32x4_t neg_dmin =
          vnegq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(vuzp2q_u16(h, h)))));
      float32x4_t dw[2][kRows], cw[2][kRows];  // [blocks 0-3, 4-7][row]
      auto row_scales = [&](int j, float dj, float neg_dminj) {
        alignas(16) uint8_t sm[16];  // 8 scales, 8 mins
        UnpackKScales(super[j] + 4, sm);
        const uint8x16_t v = vld1q_u8(sm);
        const uint16x8_t scales = vmovl_u8(vget_low_u8(v)), mins = vmovl_u8(vget_high_u8(v));
        dw[0][j] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(scales))), dj);
        dw[1][j] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_high_u16(scales))), dj);
        cw[0][j] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(mins))), neg_dminj);
        cw[1][j] = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_high_u16(mins))), neg_dminj);
      };
      row_scales(0, vgetq_lane_f32(d, 0), vgetq_lane_f32(neg_dmin, 0));
      row_scales(1, vgetq_lane_f32(d, 1), vgetq_lane_f32(neg_dmin, 1));
      row_scales(2, vgetq_lane_f32(d, 2), vgetq_lane_f32(neg_dmin, 2));
      row_scales(3, vgetq_lane_f32(d, 3), vgetq_lane_f32(neg_dmin, 3));
      // Interleaving stores turn [row][block] into [block][row].
      for (int half = 0; half < 2; ++half) {
        float* out_dw = reinterpret_cast<float*>(&s.dw[8 * sb + 4 * half]);
        float* out_cw = reinterpret_cast<float*>(&s.cw[8 * sb + 4 * half]);
        vst4q_f32(out_dw, (float32x4x4_t{{dw[half][0], dw[half][1], dw[half][2], dw[half][3]}}));
        vst4q_f32(out_cw, (float32x4x4_t{{cw[half][0], cw[half][1], cw[half][2], cw[half][3]}}));
      }
    }
  }
  // Blocks b (even) and b + 1 share their 32 bytes: low and high nibbles.
  static constexpr int kStep = 2;
  static HWY_INLINE void Load(const uint8_t* const rows[kRows], int64_t b, BlockValues* out) {
    const uint64_t ub = uint64_t(b);
    const size_t offset = size_t(ub >> 3) * kSuperBytes + 16 + 32 * size_t((ub & 7) >> 1);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    for (int j = 0; j < kRows; ++j) {
      const uint8x16_t q0 = vld1q_u8(rows[j] + offset), q1 = vld1q_u8(rows[j] + offset + 16);
      out[0].lo[j] = vreinterpretq_s8_u8(vandq_u8(q0, low4));
      out[0].hi[j] = vreinterpretq_s8_u8(vandq_u8(q1, low4));
      out[1].lo[j] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
      out[1].hi[j] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
    }
  }
};

// q6_k: super-blocks of 8 blocks (210 bytes: 128 of low nibbles ql, 64 of high
// bit pairs qh, 16 int8 scales, f16 d). Block b = 4 h + p takes the low (p < 2)
// or high nibbles of ql[64 h + 32 (p % 2) ..] and bits 2p, 2p + 1 of
// qh[32 h ..]; its halves of 16 have scales 2b and 2b + 1.
struct Q6_KFormat {
  static constexpr size_t kSuperBytes = 210;
  static constexpr int32_t kZero = 0;
  static constexpr bool kMin = false;
  static constexpr bool kHalfScales = true;
  static HWY_INLINE void Scales(const uint8_t* const rows[kRows], int64_t b0, int64_t nb,
                                ChunkScales& s) {
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
      int32x4_t even[2][kRows], odd[2][kRows];  // [blocks 0-3, 4-7][row]
      uint16_t h[kRows];
      for (int j = 0; j < kRows; ++j) {
        const uint8_t* super = rows[j] + size_t(b0 / 8 + sb) * kSuperBytes;
        const int8x16_t sc = vld1q_s8(reinterpret_cast<const int8_t*>(super + 192));
        const int16x8_t e = vmovl_s8(vget_low_s8(vuzp1q_s8(sc, sc)));
        const int16x8_t o = vmovl_s8(vget_low_s8(vuzp2q_s8(sc, sc)));
        even[0][j] = vmovl_s16(vget_low_s16(e));
        even[1][j] = vmovl_s16(vget_high_s16(e));
        odd[0][j] = vmovl_s16(vget_low_s16(o));
        odd[1][j] = vmovl_s16(vget_high_s16(o));
        std::memcpy(&h[j], super + 208, 2);
      }
      const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
      for (int half = 0; half < 2; ++half) {
        int32_t* lo = reinterpret_cast<int32_t*>(&s.scale_lo[8 * sb + 4 * half]);
        int32_t* hi = reinterpret_cast<int32_t*>(&s.scale_hi[8 * sb + 4 * half]);
        vst4q_s32(lo, (int32x4x4_t{{even[half][0], even[half][1], even[half][2], even[half][3]}}));
        vst4q_s32(hi, (int32x4x4_t{{odd[half][0], odd[half][1], odd[half][2], odd[half][3]}}));
      }
      for (int i = 0; i < 8; ++i) s.dw[8 * sb + i] = d;
    }
  }
  // Blocks b (even) and b + 1 share their high bits (qh) and shift.
  static constexpr int kStep = 2;
  static HWY_INLINE void Load(const uint8_t* const rows[kRows], int64_t b, BlockValues* out) {
    const uint64_t ub = uint64_t(b), i = ub & 7, half = i >> 2, part = i & 3;  // part 0 or 2
    const size_t super = size_t(ub >> 3) * kSuperBytes;
    const size_t ql = super + 64 * size_t(half);
    const size_t qh = super + 128 + 32 * size_t(half);
    const uint8x16_t low4 = vdupq_n_u8(0x0f), low2 = vdupq_n_u8(0x03);
    const int8x16_t shift0 = vdupq_n_s8(int8_t(-2 * int(part)));
    const int8x16_t shift1 = vdupq_n_s8(int8_t(-2 * int(part) - 2));
    const int8x16_t offset = vdupq_n_s8(32);
    for (int j = 0; j < kRows; ++j) {
      const uint8_t* row = rows[j];
      const uint8x16_t h0 = vld1q_u8(row + qh), h1 = vld1q_u8(row + qh + 16);
      for (int k = 0; k < 2; ++k) {  // block b + k: ql bytes 32 k .., bits 2 (part + k)
        uint8x16_t l0 = vld1q_u8(row + ql + 32 * k), l1 = vld1q_u8(row + ql + 32 * k + 16);
        if (part < 2) {
          l0 = vandq_u8(l0, low4);
          l1 = vandq_u8(l1, low4);
        } else {
          l0 = vshrq_n_u8(l0, 4);
          l1 = vshrq_n_u8(l1, 4);
        }
        const int8x16_t shift = k == 0 ? shift0 : shift1;
        const uint8x16_t b0 = vandq_u8(vshlq_u8(h0, shift), low2);
        const uint8x16_t b1 = vandq_u8(vshlq_u8(h1, shift), low2);
        out[k].lo[j] = vsubq_s8(vreinterpretq_s8_u8(vsliq_n_u8(l0, b0, 4)), offset);
        out[k].hi[j] = vsubq_s8(vreinterpretq_s8_u8(vsliq_n_u8(l1, b1, 4)), offset);
      }
    }
  }
};

// ---- integer dots of 4 weight rows with one or two activation rows

// sum of each of d[0..3] into lane j.
HWY_INLINE int32x4_t SumRows(const int32x4_t d[kRows]) {
  return vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3]));
}

// lo[r] / hi[r]: lane j = dot of row j with activation row r over k 0-15 / 16-31
// (kSplit), or lo[r] the whole block's dot.
template <bool kSplit>
HWY_INLINE void DotOneRow(const BlockValues& w, const int8_t* x, int32x4_t& lo,
                                         int32x4_t& hi) {
  const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
  const int32x4_t zero = vdupq_n_s32(0);
  int32x4_t dl[kRows], dh[kRows];
  for (int j = 0; j < kRows; ++j) {
    if constexpr (kSplit) {
      dl[j] = vdotq_s32(zero, w.lo[j], x0);
      dh[j] = vdotq_s32(zero, w.hi[j], x1);
    } else {
      dl[j] = vdotq_s32(vdotq_s32(zero, w.lo[j], x0), w.hi[j], x1);
    }
  }
  lo = SumRows(dl);
  if constexpr (kSplit) hi = SumRows(dh);
}

// f(r0, R) for the activation rows in tiles of up to kMax (2 or 4), R a
// std::integral_constant so that each tile size gets its own unrolled kernel.
template <int kMax, class F>
HWY_INLINE void ForEachRowTile(int64_t t, const F& f) {
  for (int64_t r0 = 0; r0 < t; r0 += kMax) {
    const int64_t rows = std::min<int64_t>(kMax, t - r0);
    if (rows == 1) {
      f(r0, std::integral_constant<int, 1>());
    } else if (rows == 2) {
      f(r0, std::integral_constant<int, 2>());
    } else if constexpr (kMax == 4) {
      if (rows == 3) {
        f(r0, std::integral_constant<int, 3>());
      } else {
        f(r0, std::integral_constant<int, 4>());
      }
    }
  }
}

// acc += one block's contribution, the f32 steps every ARM target shares (see
// the top): dot is the block's integer dot before the zero point's correction.
template <class Format>
HWY_INLINE float32x4_t Step(float32x4_t acc, int32x4_t dot, float32x4_t dw, float32x4_t cw,
                            const QuantizedActivations& x, int64_t xb) {
  if constexpr (Format::kZero != 0) dot = vaddq_s32(dot, vdupq_n_s32(-Format::kZero * x.sum[xb]));
  acc = vfmaq_f32(acc, vcvtq_f32_s32(dot), vmulq_n_f32(dw, x.d[xb]));
  if constexpr (Format::kMin) acc = vfmaq_n_f32(acc, cw, x.s[xb]);
  return acc;
}

// ---- weights stored as panels (panel_layout.h, the ARM layout): 8 rows in
// pairs, 8 bytes of each row of a pair per 16-byte vector

// The 4 weight rows interleaved in pairs for smmla: pair p (rows 2p, 2p+1),
// part c holds 8 bytes of each row, k 8c .. 8c + 7. (The stored panels are in
// this form; the file layout is put in it by Pair.)
struct PairedValues {
  int8x16_t v[2][4];
};

// One block of a stored group of 8 rows: the pairs of half h (rows 4h..4h+3),
// and what the integer dot of those values is: 16 x the dot for the nibble
// formats (the value sits in the top 4 bits), so shifted back exactly.
struct Q8_0Panel {
  static constexpr size_t kValueBytes = 256;
  static constexpr int32_t kZero = 0;
  static constexpr bool kMin = false;
  static constexpr bool kNibbles = false;
  static HWY_INLINE void Values(const uint8_t* v, int h, PairedValues& p) {
    for (int q = 0; q < 2; ++q)
      for (int c = 0; c < 4; ++c)
        p.v[q][c] = vld1q_s8(reinterpret_cast<const int8_t*>(v + 16 * (4 * (2 * h + q) + c)));
  }
};

// Stored nibbles q ^ 8: the top 4 bits of a byte hold q - 8.
template <int32_t kZeroPoint, bool kHasMin>
struct NibblePanel {
  static constexpr size_t kValueBytes = 128;
  static constexpr int32_t kZero = kZeroPoint;  // q4_1: its nibbles came out as q - 8
  static constexpr bool kMin = kHasMin;
  static constexpr bool kNibbles = true;
  static HWY_INLINE void Values(const uint8_t* v, int h, PairedValues& p) {
    const uint8x16_t high4 = vdupq_n_u8(0xf0);
    for (int q = 0; q < 2; ++q) {
      for (int c = 0; c < 2; ++c) {
        const uint8x16_t n = vld1q_u8(v + 16 * (2 * (2 * h + q) + c));
        p.v[q][c] = vreinterpretq_s8_u8(vshlq_n_u8(n, 4));
        p.v[q][c + 2] = vreinterpretq_s8_u8(vandq_u8(n, high4));
      }
    }
  }
};
using Q4_0Panel = NibblePanel<0, false>;
using Q4_1Panel = NibblePanel<-8, true>;

// lane j of out[h] = dot of row 4h + j of a stored group with the activation
// block at x: each pair's 16-byte vectors against the same 8 activation bytes
// twice, then the two partial sums of each row added (addp).
HWY_INLINE void PanelDotOneRow(const PairedValues p[2], const int8_t* x, int32x4_t out[2]) {
  const int64x2_t x0 = vreinterpretq_s64_s8(vld1q_s8(x));
  const int64x2_t x1 = vreinterpretq_s64_s8(vld1q_s8(x + 16));
  const int8x16_t xd[4] = {
      vreinterpretq_s8_s64(vdupq_laneq_s64(x0, 0)), vreinterpretq_s8_s64(vdupq_laneq_s64(x0, 1)),
      vreinterpretq_s8_s64(vdupq_laneq_s64(x1, 0)), vreinterpretq_s8_s64(vdupq_laneq_s64(x1, 1))};
  for (int h = 0; h < 2; ++h) {
    int32x4_t a[2];
    for (int q = 0; q < 2; ++q) {
      a[q] = vdotq_s32(vdupq_n_s32(0), p[h].v[q][0], xd[0]);
      for (int c = 1; c < 4; ++c) a[q] = vdotq_s32(a[q], p[h].v[q][c], xd[c]);
    }
    out[h] = vpaddq_s32(a[0], a[1]);
  }
}

}  // namespace arm

namespace arm::dot {
#define ANYMOE_ARM_PAIRS 0
#include "backends/cpu/kernels/quant_matmul_arm_tile-inl.h"
#undef ANYMOE_ARM_PAIRS
}  // namespace arm::dot
HWY_POP_ATTRIBUTES

HWY_PUSH_ATTRIBUTES(ANYMOE_ARM_BASE "+dotprod+i8mm")
namespace arm {

HWY_INLINE int8x16_t Zip1(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
HWY_INLINE int8x16_t Zip2(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

HWY_INLINE void Pair(const BlockValues& w, PairedValues& p) {
  for (int q = 0; q < 2; ++q) {
    p.v[q][0] = Zip1(w.lo[2 * q], w.lo[2 * q + 1]);
    p.v[q][1] = Zip2(w.lo[2 * q], w.lo[2 * q + 1]);
    p.v[q][2] = Zip1(w.hi[2 * q], w.hi[2 * q + 1]);
    p.v[q][3] = Zip2(w.hi[2 * q], w.hi[2 * q + 1]);
  }
}

// As DotOneRow for activation rows x and x' at once: lo0 / hi0 for x, lo1 / hi1 for x'.
template <bool kSplit>
HWY_INLINE void DotTwoRows(const PairedValues& w, const int8_t* x,
                                           const int8_t* x2, int32x4_t& lo0, int32x4_t& hi0,
                                           int32x4_t& lo1, int32x4_t& hi1) {
  const int8x16_t a0 = vld1q_s8(x), a1 = vld1q_s8(x + 16);
  const int8x16_t b0 = vld1q_s8(x2), b1 = vld1q_s8(x2 + 16);
  const int8x16_t xp[4] = {Zip1(a0, b0), Zip2(a0, b0), Zip1(a1, b1), Zip2(a1, b1)};
  const int32x4_t zero = vdupq_n_s32(0);
  // m[q] lanes: row 2q . x, row 2q . x', row 2q+1 . x, row 2q+1 . x'.
  int32x4_t ml[2], mh[2];
  for (int q = 0; q < 2; ++q) {
    ml[q] = vmmlaq_s32(vmmlaq_s32(zero, w.v[q][0], xp[0]), w.v[q][1], xp[1]);
    if constexpr (kSplit) {
      mh[q] = vmmlaq_s32(vmmlaq_s32(zero, w.v[q][2], xp[2]), w.v[q][3], xp[3]);
    } else {
      ml[q] = vmmlaq_s32(vmmlaq_s32(ml[q], w.v[q][2], xp[2]), w.v[q][3], xp[3]);
    }
  }
  lo0 = vuzp1q_s32(ml[0], ml[1]);
  lo1 = vuzp2q_s32(ml[0], ml[1]);
  if constexpr (kSplit) {
    hi0 = vuzp1q_s32(mh[0], mh[1]);
    hi1 = vuzp2q_s32(mh[0], mh[1]);
  }
}

}  // namespace arm

namespace arm::i8mm {
#define ANYMOE_ARM_PAIRS 1
#include "backends/cpu/kernels/quant_matmul_arm_tile-inl.h"
#undef ANYMOE_ARM_PAIRS
}  // namespace arm::i8mm
HWY_POP_ATTRIBUTES
#undef ANYMOE_ARM_BASE

namespace arm {

// The kernel for `type` on this CPU target, or false where it has none (no
// dotprod allowed, or a type without one).
template <class Format>
HWY_INLINE void Dispatch(bool pairs, const uint8_t* w, size_t row_bytes,
                         const QuantizedActivations& x, int64_t n0, int64_t n1, float* y,
                         int64_t ldy) {
  if (pairs) return i8mm::MatmulRows<Format>(w, row_bytes, x, n0, n1, y, ldy);
  dot::MatmulRows<Format>(w, row_bytes, x, n0, n1, y, ldy);
}

// Weights stored as panels: the kernel for q8_0 / q4_0 / q4_1 where dotprod is allowed.
HWY_INLINE bool HasPanelKernels(DType type) {
  return HasPanelLayout(type) && CpuExtensionActive(CpuExtension::kDotProd);
}

template <class Format>
HWY_INLINE void DispatchPanels(bool pairs, const uint8_t* panels, size_t row_bytes,
                               const QuantizedActivations& x, int64_t n0, int64_t n1, float* y,
                               int64_t ldy) {
  if (pairs) return i8mm::StoredMatmulRows<Format>(panels, row_bytes, x, n0, n1, y, ldy);
  dot::StoredMatmulRows<Format>(panels, row_bytes, x, n0, n1, y, ldy);
}

HWY_INLINE void PanelMatmulRows(DType type, const uint8_t* panels, size_t row_bytes,
                                const QuantizedActivations& x, int64_t n0, int64_t n1, float* y,
                                int64_t ldy) {
  const bool pairs = x.t >= 2 && CpuExtensionActive(CpuExtension::kI8mm);
  if (type == DType::kQ8_0) return DispatchPanels<Q8_0Panel>(pairs, panels, row_bytes, x, n0, n1, y, ldy);
  if (type == DType::kQ4_0) return DispatchPanels<Q4_0Panel>(pairs, panels, row_bytes, x, n0, n1, y, ldy);
  DispatchPanels<Q4_1Panel>(pairs, panels, row_bytes, x, n0, n1, y, ldy);
}

HWY_INLINE bool TryMatmulRows(DType type, const uint8_t* w, size_t row_bytes,
                              const QuantizedActivations& x, int64_t n0, int64_t n1, float* y,
                              int64_t ldy) {
  if (!CpuExtensionActive(CpuExtension::kDotProd)) return false;
  // smmla pays for its interleaving from two activation rows on.
  const bool pairs = x.t >= 2 && CpuExtensionActive(CpuExtension::kI8mm);
  switch (type) {
    case DType::kQ8_0: Dispatch<Q8_0Format>(pairs, w, row_bytes, x, n0, n1, y, ldy); return true;
    case DType::kQ4_0: Dispatch<Q4_0Format>(pairs, w, row_bytes, x, n0, n1, y, ldy); return true;
    case DType::kQ4_1: Dispatch<Q4_1Format>(pairs, w, row_bytes, x, n0, n1, y, ldy); return true;
    case DType::kQ4_K: Dispatch<Q4_KFormat>(pairs, w, row_bytes, x, n0, n1, y, ldy); return true;
    case DType::kQ6_K: Dispatch<Q6_KFormat>(pairs, w, row_bytes, x, n0, n1, y, ldy); return true;
    default: return false;
  }
}

}  // namespace arm

#endif  // ANYMOE_ARM_DOT_KERNELS
