// Integer matmul kernels for GGUF block weights (see quant_matmul.h), compiled once
// per Highway target. Per weight row, a chunk of blocks is unpacked to int8 (int16
// for q6_k) with one f32 scale per block of 32 in L1, then dotted against 1..4
// activation rows at a time. q8_0 is used straight from the weights. On AVX3_DL
// (AVX-512 VNNI) the int8 dot is one vpdpbusd per block; elsewhere it widens to
// int16 with ReorderWidenMulAccumulate. q8_0, q4_0, q4_1 and q6_k on AVX3_DL and
// AVX2 (with or without AVX-VNNI) take register-only x86 kernels instead
// (quant_matmul_x86-inl.h: 8-row panels for q8_0 / q4_0 / q4_1, four weight
// rows at a time for q6_k and the low-bit types q5_0 / q5_1 / q2_k / q3_k /
// iq4_nl / iq4_xs / mxfp4, quant_matmul_x86_blocks-inl.h, and the codebook
// i-quants iq2_xxs / iq2_xs / iq2_s / iq3_xxs / iq3_s / iq1_s / iq1_m,
// quant_matmul_iq2xxs-inl.h and quant_matmul_x86_iquants-inl.h; prefill
// from stored panels on AVX3_DL in 512-bit registers, quant_matmul_gemm-inl.h). On ARM
// with dotprod (i8mm) q8_0 / q4_0 / q4_1 / q4_k / q6_k take sdot (smmla)
// kernels, quant_matmul_arm-inl.h. Elsewhere the low-bit types are unpacked
// to int16 per chunk (quant_matmul_unpack-inl.h) for the portable kernels.
//
// Per block b of 32 and activation row r the kernels compute
//   y += dw[b] * dx[r][b] * sum_i w_i * xq_i  +  cw[b] * s[r][b]
// where w_i are the block's integer weights as unpacked (q4 nibbles 0..15, q8_0
// values, or q8_0 + 128 in the unsigned VNNI form) and cw folds in what that
// integer form leaves out: -8 dw (q4_0), the min (q4_1), -dmin * min (q4_k),
// -128 dw (VNNI q8_0).

// AVX3_DL (Ice Lake, Zen 4 and later: VNNI) is only generated on request in
// Highway 1.0.3. Every file that dispatches to it must ask; this one does.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/quant_matmul.cc"
#include "backends/cpu/kernels/quant_matmul.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/float_matmul.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "core/check.h"
#include "core/half.h"
#include "core/iq_grids.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_ARCH_X86
#include <immintrin.h>  // the x86 kernels (quant_matmul_x86-inl.h and what it uses)
#elif HWY_ARCH_ARM_A64
#include <arm_neon.h>  // the dotprod / i8mm kernels (quant_matmul_arm-inl.h)

#include "backends/cpu/kernels/cpu_target.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kTile = 4;              // activation rows per pass over a weight chunk
constexpr int64_t kChunkBlocks = 64;  // blocks of 32 unpacked at a time (2 KiB of int8);
                                      // a multiple of every vector length in floats
constexpr int kQ = 32;                // elements per block

// Weight block layouts (GGUF; see core/dtype.cc for the reference dequantisers).
constexpr size_t kQ8_0Bytes = 34, kQ4_0Bytes = 18, kQ4_1Bytes = 20;
constexpr size_t kQ4_KBytes = 144, kQ6_KBytes = 210;

#if HWY_TARGET == HWY_AVX3_DL
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

using DI16 = hn::CappedTag<int16_t, 16>;  // at most half a block of int16
using DI32 = hn::RepartitionToWide<DI16>;
using DF32 = hn::Rebind<float, DI32>;
using DU8H = hn::Rebind<uint8_t, DI16>;  // the bytes of one DI16 vector
using DI8H = hn::Rebind<int8_t, DI16>;

// The f32 side of one chunk of a weight row: per block of 32 the scale dw and the
// coefficient cw of the activation block sum (see top), and q6_k's int16 weights.
struct WeightChunk {
  alignas(64) float dw[kChunkBlocks];
  alignas(64) float cw[kChunkBlocks];
  alignas(64) uint16_t h[kChunkBlocks];  // staging for f16 scales
  alignas(64) uint16_t h2[kChunkBlocks];
  alignas(64) int16_t q16[kChunkBlocks * kQ];  // q6_k: (q - 32) * sub-block scale
  bool has_cw;
};

// ------------------------------------------------------------------ scales

// f16 bit patterns to f32, in whole vectors: h and f hold kChunkBlocks entries, and
// entries past n are garbage that no kernel reads.
HWY_INLINE void F16ToF32Array(const uint16_t* h, float* f, int64_t n) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  for (int64_t i = 0; i < n; i += int64_t(hn::Lanes(df))) {
    hn::Store(hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(h + i))), df,
              f + i);
  }
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Blocks of 32 with an f16 scale at offset 0 and, for q4_1, an f16 min at 2.
template <size_t kBytes, bool kHasMin>
HWY_INLINE void BlockScales(const uint8_t* base, int64_t nb, float cw_per_dw, WeightChunk* c) {
  for (int64_t b = 0; b < nb; ++b) c->h[b] = LoadU16(base + b * kBytes);
  F16ToF32Array(c->h, c->dw, nb);
  c->has_cw = kHasMin || cw_per_dw != 0.0f;
  if constexpr (kHasMin) {
    for (int64_t b = 0; b < nb; ++b) c->h2[b] = LoadU16(base + b * kBytes + 2);
    F16ToF32Array(c->h2, c->cw, nb);
  } else {
    for (int64_t b = 0; b < nb; ++b) c->cw[b] = cw_per_dw * c->dw[b];
  }
}

// The 6-bit scales and mins of a q4_k super-block (layout in core/dtype.cc), with
// 32-bit word operations: out[0..7] = scales, out[8..15] = mins.
inline void UnpackKScales(const uint8_t* s, uint8_t out[16]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t in[3], w[4];
  std::memcpy(in, s, 12);
  w[0] = in[0] & kLow6;                                           // scales 0..3
  w[1] = (in[2] & kLow4) | (((in[0] >> 6) & kLow2) << 4);         // scales 4..7
  w[2] = in[1] & kLow6;                                           // mins 0..3
  w[3] = ((in[2] >> 4) & kLow4) | (((in[1] >> 6) & kLow2) << 4);  // mins 4..7
  std::memcpy(out, w, 16);
}

// dw and cw of q4_k (or q5_k: the same head in super-blocks of `super_bytes`).
void Q4_KScales(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c,
                size_t super_bytes = kQ4_KBytes) {
  const int64_t nsb = nb / 8;
  const uint8_t* first = row + (blk0 / 8) * super_bytes;
  alignas(64) uint8_t sm[kChunkBlocks / 8][16];
  for (int64_t sb = 0; sb < nsb; ++sb) {
    c->h[sb] = LoadU16(first + sb * super_bytes);
    c->h2[sb] = LoadU16(first + sb * super_bytes + 2);
    UnpackKScales(first + sb * super_bytes + 4, sm[sb]);
  }
  alignas(64) float d[kChunkBlocks / 8 + 16], dmin[kChunkBlocks / 8 + 16];
  F16ToF32Array(c->h, d, nsb);
  F16ToF32Array(c->h2, dmin, nsb);
  const hn::CappedTag<float, 8> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const auto vd = hn::Set(df, d[sb]), vm = hn::Set(df, -dmin[sb]);
    for (size_t j = 0; j < 8; j += hn::Lanes(df)) {
      const auto scale = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(du8, sm[sb] + j)));
      const auto min = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(du8, sm[sb] + 8 + j)));
      hn::StoreU(hn::Mul(vd, scale), df, c->dw + 8 * sb + int64_t(j));
      hn::StoreU(hn::Mul(vm, min), df, c->cw + 8 * sb + int64_t(j));
    }
  }
  c->has_cw = true;
}

// q6_k super-block: value 128 h + 32 s + i takes a nibble of ql[64 h + 32 (s & 1) + i]
// (low for s < 2) and bits 2s..2s+1 of qh[32 h + i]; minus 32, times the int8
// scale of its 16. Stored as int16 so the sub-block scales fold into the integers.
void UnpackQ6_K(const uint8_t* row, int64_t blk0, int64_t nb, WeightChunk* c) {
  const hn::CappedTag<uint8_t, 32> d8;
  const DI16 d16;
  const DI8H d8h;
  const auto m4 = hn::Set(d8, 0x0f), m2 = hn::Set(d8, 0x03), off = hn::Set(d8, 32);
  alignas(64) uint8_t v[256];
  for (int64_t sb = 0; sb < nb / 8; ++sb) {
    const uint8_t* blk = row + (blk0 / 8 + sb) * kQ6_KBytes;
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = F16ToF32(LoadU16(blk + 208));
    for (int h = 0; h < 2; ++h) {
      for (size_t i = 0; i < 32; i += hn::Lanes(d8)) {
        const auto l0 = hn::LoadU(d8, ql + 64 * h + i);
        const auto l1 = hn::LoadU(d8, ql + 64 * h + 32 + i);
        const auto hb = hn::LoadU(d8, qh + 32 * h + i);
        const auto hi0 = hn::ShiftLeft<4>(hn::And(hb, m2));
        const auto hi1 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hb), m2));
        const auto hi2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hb), m2));
        const auto hi3 = hn::ShiftLeft<4>(hn::ShiftRight<6>(hb));
        uint8_t* out = v + 128 * h + i;  // wraps to the int8 value q - 32
        hn::StoreU(hn::Sub(hn::Or(hn::And(l0, m4), hi0), off), d8, out);
        hn::StoreU(hn::Sub(hn::Or(hn::And(l1, m4), hi1), off), d8, out + 32);
        hn::StoreU(hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hi2), off), d8, out + 64);
        hn::StoreU(hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hi3), off), d8, out + 96);
      }
    }
    int16_t* q16 = c->q16 + 256 * sb;
    const int8_t* vs = reinterpret_cast<const int8_t*>(v);
    for (int g = 0; g < 16; ++g) {
      const auto scale = hn::Set(d16, int16_t(scales[g]));
      for (size_t i = 0; i < 16; i += hn::Lanes(d16)) {
        hn::StoreU(hn::Mul(hn::PromoteTo(d16, hn::LoadU(d8h, vs + 16 * g + i)), scale), d16,
                   q16 + 16 * g + i);
      }
    }
    for (int j = 0; j < 8; ++j) c->dw[8 * sb + j] = d;
  }
  c->has_cw = false;
}

// ------------------------------------------------------------------ weight sources

// How the dot kernels read block b of a chunk, read in place from the weights
// (q6_k: from WeightChunk::q16). I16(b, i): values i .. i + Lanes(DI16) of the
// block as int16 (i is a multiple of the lane count, so never straddles a half).
// U8(b) (AVX3_DL): the 32 values as unsigned bytes for vpdpbusd.
struct Q8_0Source {
  const uint8_t* q;  // quants of the chunk's first block
  HWY_INLINE hn::Vec<DI16> I16(int64_t b, size_t i) const {
    const auto* p = reinterpret_cast<const int8_t*>(q + size_t(b) * kQ8_0Bytes + i);
    return hn::PromoteTo(DI16(), hn::LoadU(DI8H(), p));
  }
#if HWY_TARGET == HWY_AVX3_DL
  // As w + 128: the kernel's cw = -128 dw takes the offset back out.
  HWY_INLINE hn::Vec256<uint8_t> U8(int64_t b) const {
    const hn::Full256<uint8_t> d;
    return hn::Xor(hn::LoadU(d, q + size_t(b) * kQ8_0Bytes), hn::Set(d, 0x80));
  }
#endif
};

// q4_0 / q4_1: 16 bytes per block, low nibbles are values 0..15, high 16..31.
template <size_t kBytes>
struct Q4Source {
  const uint8_t* q;  // nibbles of the chunk's first block
  HWY_INLINE hn::Vec<DI16> I16(int64_t b, size_t i) const {
    const DI16 d16;
    const auto v =
        hn::BitCast(d16, hn::PromoteTo(hn::RebindToUnsigned<DI16>(),
                                       hn::LoadU(DU8H(), q + size_t(b) * kBytes + (i & 15))));
    return i < 16 ? hn::And(v, hn::Set(d16, 0x0f)) : hn::ShiftRight<4>(v);
  }
#if HWY_TARGET == HWY_AVX3_DL
  HWY_INLINE hn::Vec256<uint8_t> U8(int64_t b) const {
    const hn::Full128<uint8_t> d;
    const auto v = hn::LoadU(d, q + size_t(b) * kBytes);
    const auto m = hn::Set(d, 0x0f);
    return hn::Combine(hn::Full256<uint8_t>(), hn::And(hn::ShiftRight<4>(v), m), hn::And(v, m));
  }
#endif
};

// q4_k: sub-block j of a super-block is byte group j / 2 of its 128 nibble bytes,
// low nibbles for even j.
struct Q4_KSource {
  const uint8_t* row;
  int64_t blk0;  // a multiple of 8
  HWY_INLINE const uint8_t* Bytes(int64_t b) const {
    const uint64_t g = uint64_t(blk0 + b);
    return row + (g >> 3) * kQ4_KBytes + 16 + 32 * ((g & 7) >> 1);
  }
  HWY_INLINE hn::Vec<DI16> I16(int64_t b, size_t i) const {
    const DI16 d16;
    const auto v = hn::BitCast(
        d16, hn::PromoteTo(hn::RebindToUnsigned<DI16>(), hn::LoadU(DU8H(), Bytes(b) + i)));
    return (b & 1) ? hn::ShiftRight<4>(v) : hn::And(v, hn::Set(d16, 0x0f));
  }
#if HWY_TARGET == HWY_AVX3_DL
  HWY_INLINE hn::Vec256<uint8_t> U8(int64_t b) const {
    const hn::Full256<uint8_t> d;
    const auto v = hn::LoadU(d, Bytes(b));
    return hn::And((b & 1) ? hn::ShiftRight<4>(v) : v, hn::Set(d, 0x0f));
  }
#endif
};

struct Int16Source {
  const int16_t* q;
  HWY_INLINE hn::Vec<DI16> I16(int64_t b, size_t i) const {
    return hn::LoadU(DI16(), q + b * kQ + int64_t(i));
  }
};

// ------------------------------------------------------------------ dot kernels

// Pointers of up to kTile activation rows at the chunk's first block.
struct RowSet {
  const int8_t* q[kTile];
  const float* scale[kTile];  // dw[b] * d[r][b]: the f32 factor of each block's integer dot
  const float* s[kTile];
};

// Portable block step: for rows r < R, f_r += scale_r[b] * dot(w, x_r), widening
// to int16. Which int32 lane holds which products is target-defined; only the
// lane sum is used.
template <int R, class Source>
HWY_INLINE void BlockStepPortable(const Source& src, const RowSet& x, int64_t b, hn::Vec<DF32>& f0,
                                  hn::Vec<DF32>& f1, hn::Vec<DF32>& f2, hn::Vec<DF32>& f3) {
  const DI16 d16;
  const DI32 d32;
  const DF32 df;
  const DI8H d8;
  auto s00 = hn::Zero(d32), s01 = s00, s10 = s00, s11 = s00;
  auto s20 = s00, s21 = s00, s30 = s00, s31 = s00;
  for (size_t i = 0; i < size_t(kQ); i += hn::Lanes(d16)) {
    const auto wv = src.I16(b, i);
    const int64_t o = b * kQ + int64_t(i);
    s00 = hn::ReorderWidenMulAccumulate(d32, wv, hn::PromoteTo(d16, hn::LoadU(d8, x.q[0] + o)), s00,
                                        s01);
    if constexpr (R > 1) {
      s10 = hn::ReorderWidenMulAccumulate(d32, wv, hn::PromoteTo(d16, hn::LoadU(d8, x.q[1] + o)),
                                          s10, s11);
    }
    if constexpr (R > 2) {
      s20 = hn::ReorderWidenMulAccumulate(d32, wv, hn::PromoteTo(d16, hn::LoadU(d8, x.q[2] + o)),
                                          s20, s21);
    }
    if constexpr (R > 3) {
      s30 = hn::ReorderWidenMulAccumulate(d32, wv, hn::PromoteTo(d16, hn::LoadU(d8, x.q[3] + o)),
                                          s30, s31);
    }
  }
  f0 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s00, s01)), hn::Set(df, x.scale[0][b]), f0);
  if constexpr (R > 1) {
    f1 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s10, s11)), hn::Set(df, x.scale[1][b]), f1);
  }
  if constexpr (R > 2) {
    f2 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s20, s21)), hn::Set(df, x.scale[2][b]), f2);
  }
  if constexpr (R > 3) {
    f3 = hn::MulAdd(hn::ConvertTo(df, hn::Add(s30, s31)), hn::Set(df, x.scale[3][b]), f3);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// acc += per 4 bytes: u (unsigned) . s (signed). Highway 1.0.3 compiles AVX3_DL
// with "avxvnni", for which the compiler emits the VEX form of vpdpbusd that CPUs
// with only AVX512_VNNI (Zen 4, Ice Lake) lack, so spell out the EVEX form.
HWY_INLINE hn::Vec256<int32_t> DotU8I8(hn::Vec256<int32_t> acc, hn::Vec256<uint8_t> u,
                                       hn::Vec256<int8_t> s) {
  __m256i a = acc.raw;
  asm("%{evex%} vpdpbusd %2, %1, %0" : "+v"(a) : "v"(u.raw), "vm"(s.raw));
  return hn::Vec256<int32_t>{a};
}

// VNNI block step: one vpdpbusd per block and row.
template <int R, class Source>
HWY_INLINE void BlockStepVnni(const Source& src, const RowSet& x, int64_t b, hn::Vec256<float>& f0,
                              hn::Vec256<float>& f1, hn::Vec256<float>& f2, hn::Vec256<float>& f3) {
  const hn::Full256<int8_t> di8;
  const hn::Full256<int32_t> d32;
  const hn::Full256<float> df;
  const auto wv = src.U8(b);
  const auto zero = hn::Zero(d32);
  const int64_t o = b * kQ;
  f0 = hn::MulAdd(hn::ConvertTo(df, DotU8I8(zero, wv, hn::LoadU(di8, x.q[0] + o))),
                  hn::Set(df, x.scale[0][b]), f0);
  if constexpr (R > 1) {
    f1 = hn::MulAdd(hn::ConvertTo(df, DotU8I8(zero, wv, hn::LoadU(di8, x.q[1] + o))),
                    hn::Set(df, x.scale[1][b]), f1);
  }
  if constexpr (R > 2) {
    f2 = hn::MulAdd(hn::ConvertTo(df, DotU8I8(zero, wv, hn::LoadU(di8, x.q[2] + o))),
                    hn::Set(df, x.scale[2][b]), f2);
  }
  if constexpr (R > 3) {
    f3 = hn::MulAdd(hn::ConvertTo(df, DotU8I8(zero, wv, hn::LoadU(di8, x.q[3] + o))),
                    hn::Set(df, x.scale[3][b]), f3);
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

// sum_b cw[b] * s[b] over n blocks.
HWY_INLINE float DotF32Inline(const float* a, const float* b, int64_t n) {
  const hn::CappedTag<float, 16> df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  auto sum = hn::Zero(df);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    sum = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), sum);
  float total = hn::GetLane(hn::SumOfLanes(df, sum));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// out[r] = dot of the chunk with activation row r, for r < R. Every row, whatever
// R, sums its even blocks in one accumulator and its odd blocks in another and
// adds the two at the end: the same rounding for a row alone and in a tile, so
// its result does not depend on its batch. (One row had four accumulators
// before; two are no slower: kernel_bench k576_n1536 t1 hot, us, before ->
// after, two rounds: AVX2 q8_0 64.2/66.5 -> 59.7/58.6, q4_k (k512) 75.9/70.3 ->
// 67.1/67.2; AVX3_DL q4_k 77.9/62.9 -> 70.6/65.2.)
template <int R, class Source>
HWY_INLINE void DotChunk(const Source& src, const WeightChunk& c, const RowSet& x, int64_t nb,
                         float* out) {
  using V = hn::Vec<DF32>;
  const auto step = [&](int64_t b, V& f0, V& f1, V& f2, V& f3) HWY_ATTR {
#if HWY_TARGET == HWY_AVX3_DL
    if constexpr (!std::is_same_v<Source, Int16Source>) {
      BlockStepVnni<R>(src, x, b, f0, f1, f2, f3);
      return;
    }
#endif
    BlockStepPortable<R>(src, x, b, f0, f1, f2, f3);
  };
  // `step` updates only as many of its accumulator arguments as there are rows.
  const DF32 df;
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, a0, a1, a2, a3);
    step(b + 1, a4, a5, a6, a7);
  }
  if (b < nb) step(b, a0, a1, a2, a3);
  out[0] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a4)));
  if constexpr (R > 1) out[1] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a1, a5)));
  if constexpr (R > 2) out[2] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a2, a6)));
  if constexpr (R > 3) out[3] = hn::GetLane(hn::SumOfLanes(df, hn::Add(a3, a7)));
  if (c.has_cw) {
    for (int r = 0; r < R; ++r) out[r] += DotF32Inline(c.cw, x.s[r], nb);
  }
}

// All activation rows against one chunk (blocks [blk0, blk0 + nb)) of weight row n,
// added to y where `accumulate` or after the first chunk.
template <class Source>
void ChunkAllRows(const Source& src, const WeightChunk& c, const QuantizedActivations& x,
                  int64_t blk0, int64_t nb, int64_t n, float* y, int64_t ldy,
                  bool accumulate = false) {
  const hn::CappedTag<float, 16> df;
  const int64_t nblocks = x.k / kQ;
  alignas(64) float scales[kTile][kChunkBlocks];
  for (int64_t r0 = 0; r0 < x.t; r0 += kTile) {
    const int rows = int(std::min<int64_t>(kTile, x.t - r0));
    RowSet xs;
    for (int r = 0; r < rows; ++r) {  // DotChunk<rows> reads no more
      const int64_t rr = r0 + r;
      xs.q[r] = x.qs + rr * x.k + blk0 * kQ;
      xs.s[r] = x.s + rr * nblocks + blk0;
      xs.scale[r] = scales[r];
      // Whole vectors: dw holds kChunkBlocks entries, and d is followed by s in
      // the activation buffer, so reading past nb stays in bounds.
      const float* dx = x.d + rr * nblocks + blk0;
      for (int64_t b = 0; b < nb; b += int64_t(hn::Lanes(df))) {
        hn::Store(hn::Mul(hn::LoadU(df, c.dw + b), hn::LoadU(df, dx + b)), df, scales[r] + b);
      }
    }
    float out[kTile];
    switch (rows) {
      case 1:
        DotChunk<1>(src, c, xs, nb, out);
        break;
      case 2:
        DotChunk<2>(src, c, xs, nb, out);
        break;
      case 3:
        DotChunk<3>(src, c, xs, nb, out);
        break;
      default:
        DotChunk<4>(src, c, xs, nb, out);
        break;
    }
    for (int r = 0; r < rows; ++r) {
      float& dst = y[(r0 + r) * ldy + n];
      dst = blk0 == 0 && !accumulate ? out[r] : dst + out[r];
    }
  }
}

#include "backends/cpu/kernels/quant_matmul_x86_dot-inl.h"
#include "backends/cpu/kernels/quant_matmul_vnni-inl.h"
#include "backends/cpu/kernels/quant_matmul_x86_blocks-inl.h"
#include "backends/cpu/kernels/quant_matmul_iq2xxs-inl.h"
#include "backends/cpu/kernels/quant_matmul_x86_iquants-inl.h"
#include "backends/cpu/kernels/quant_matmul_packed-inl.h"
#include "backends/cpu/kernels/quant_matmul_gemm-inl.h"
#include "backends/cpu/kernels/quant_matmul_x86-inl.h"
#include "backends/cpu/kernels/quant_matmul_arm-inl.h"
#include "backends/cpu/kernels/quant_matmul_unpack-inl.h"

// ------------------------------------------------------------------ entry points

void QuantizeActivationsImpl(DType type, const float* x, int64_t t, int64_t k, int64_t r0,
                             int64_t r1, void* buffer) {
  if (type == DType::kF16 || type == DType::kBF16) {
    std::memcpy(static_cast<float*>(buffer) + r0 * k, x + r0 * k, size_t((r1 - r0) * k) * sizeof(float));
    return;
  }
  const QuantizedActivations view = ActivationView(type, buffer, t, k);
  int8_t* qs = const_cast<int8_t*>(view.qs);
  float* ds = const_cast<float*>(view.d);
  float* ss = const_cast<float*>(view.s);
  int32_t* sums = const_cast<int32_t*>(view.sum);
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t lanes = hn::Lanes(df);
  const int64_t nb = k / kQ;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + r * k + b * kQ;
      auto vmax = hn::Zero(df);
      for (size_t i = 0; i < size_t(kQ); i += lanes)
        vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
      const float d = amax / 127.0f;
      const auto id = hn::Set(df, amax > 0.0f ? 127.0f / amax : 0.0f);
      auto vsum = hn::Zero(di);
      int8_t* q = qs + r * k + b * kQ;
      for (size_t i = 0; i < size_t(kQ); i += lanes) {
        const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), id));
        vsum = hn::Add(vsum, qi);
        hn::StoreU(hn::DemoteTo(d8, qi), d8, q + i);
      }
      const int32_t sum = hn::GetLane(hn::SumOfLanes(di, vsum));
      ds[r * nb + b] = d;
      ss[r * nb + b] = d * float(sum);
      sums[r * nb + b] = sum;
    }
  }
}

#if ANYMOE_ARM_DOT_KERNELS
// The types with sdot / smmla kernels (quant_matmul_arm-inl.h), where the
// selected target allows dotprod.
bool HasArmDotKernels(DType type) {
  const bool arm_type = type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_1 ||
                        type == DType::kQ4_K || type == DType::kQ6_K;
  return arm_type && CpuExtensionActive(CpuExtension::kDotProd);
}
#endif

int64_t IntegerMatmulMaxRowsImpl(DType type) {
  constexpr int64_t kSmallSteps = 32;  // decode and small batches
  // f16 / bf16 run the f32 kernels of float_matmul.h at every size.
  if (type == DType::kF16 || type == DType::kBF16) return INT64_MAX;
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  if (const x86::TypeKernels* k = x86::KernelsFor(type); k && k->any_row_count) return INT64_MAX;
#elif ANYMOE_ARM_DOT_KERNELS
  if (HasArmDotKernels(type)) return INT64_MAX;
#endif
  return kSmallSteps;
}

// What QuantMatmulRowsImpl runs for `type` (see DecodeMatmulKernel), in its order.
const char* DecodeMatmulKernelImpl(DType type) {
  if (type == DType::kF16 || type == DType::kBF16) return "f32-widened";
  if (!IsQuantMatmulSupported(type)) return "dequant-f32";
#if ANYMOE_ARM_DOT_KERNELS
  if (HasArmDotKernels(type)) return "int8-arm-dot";
#endif
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  if (x86::KernelsFor(type) != nullptr) return "int8-x86";
#endif
  // The chunk kernels: int8 sources take vpdpbusd on AVX3_DL (BlockStepVnni).
  const bool int8_source = type == DType::kQ8_0 || type == DType::kQ4_0 ||
                           type == DType::kQ4_1 || type == DType::kQ4_K;
  return kVnni && int8_source ? "int8-vnni" : "int16";
}

void QuantMatmulRowsImpl(DType type, const uint8_t* w, size_t w_row_bytes, const void* qx,
                         int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  if (type == DType::kF16 || type == DType::kBF16) {  // x kept in f32 (see QuantizeActivations)
    return FloatMatmulRows(type, w, w_row_bytes, static_cast<const float*>(qx), k, t, k, n0, n1,
                           y, ldy);
  }
  const QuantizedActivations x = ActivationView(type, qx, t, k);
#if ANYMOE_ARM_DOT_KERNELS
  if (arm::TryMatmulRows(type, w, w_row_bytes, x, n0, n1, y, ldy)) return;
#endif
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  if (const x86::TypeKernels* kernels = x86::KernelsFor(type)) {
    return kernels->file_rows(w, w_row_bytes, x, n0, n1, y, ldy);
  }
#endif
  const int64_t nblocks = k / kQ;
  WeightChunk chunk;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * w_row_bytes;
    for (int64_t blk0 = 0; blk0 < nblocks; blk0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, nblocks - blk0);
      switch (type) {
        case DType::kQ8_0: {
          const uint8_t* base = row + blk0 * kQ8_0Bytes;
          BlockScales<kQ8_0Bytes, false>(base, nb, kVnni ? -128.0f : 0.0f, &chunk);
          ChunkAllRows(Q8_0Source{base + 2}, chunk, x, blk0, nb, n, y, ldy);
          break;
        }
        case DType::kQ4_0: {
          const uint8_t* base = row + blk0 * kQ4_0Bytes;
          BlockScales<kQ4_0Bytes, false>(base, nb, -8.0f, &chunk);
          ChunkAllRows(Q4Source<kQ4_0Bytes>{base + 2}, chunk, x, blk0, nb, n, y, ldy);
          break;
        }
        case DType::kQ4_1: {
          const uint8_t* base = row + blk0 * kQ4_1Bytes;
          BlockScales<kQ4_1Bytes, true>(base, nb, 0.0f, &chunk);
          ChunkAllRows(Q4Source<kQ4_1Bytes>{base + 4}, chunk, x, blk0, nb, n, y, ldy);
          break;
        }
        case DType::kQ4_K:
          Q4_KScales(row, blk0, nb, &chunk);
          ChunkAllRows(Q4_KSource{row, blk0}, chunk, x, blk0, nb, n, y, ldy);
          break;
        case DType::kQ6_K:
          UnpackQ6_K(row, blk0, nb, &chunk);
          ChunkAllRows(Int16Source{chunk.q16}, chunk, x, blk0, nb, n, y, ldy);
          break;
        default:  // unpacked to int16 (quant_matmul_unpack-inl.h), in one or two passes
          for (int pass = 0; pass < unpack::Passes(type); ++pass) {
            unpack::Chunk(type, row, blk0, nb, pass, &chunk);
            ChunkAllRows(Int16Source{chunk.q16}, chunk, x, blk0, nb, n, y, ldy, pass > 0);
          }
          CHECK(unpack::Passes(type) > 0 && "quant matmul: unsupported weight type");
      }
    }
  }
}

int UnpackPassesImpl(DType type) { return unpack::Passes(type); }

bool HasPanelKernelsImpl(DType type) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  const x86::TypeKernels* kernels = x86::KernelsFor(type);
  return kernels != nullptr && kernels->panel_rows != nullptr;
#elif ANYMOE_ARM_DOT_KERNELS
  return arm::HasPanelKernels(type);
#else
  (void)type;
  return false;
#endif
}

void PanelMatmulRowsImpl(DType type, const uint8_t* panels, size_t w_row_bytes, const void* qx,
                         int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy) {
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
  const x86::TypeKernels* kernels = x86::KernelsFor(type);
  if (kernels != nullptr && kernels->panel_rows != nullptr) {
    return kernels->panel_rows(panels, w_row_bytes, ActivationView(type, qx, t, k), n0, n1, y,
                               ldy);
  }
#elif ANYMOE_ARM_DOT_KERNELS
  if (arm::HasPanelKernels(type)) {
    return arm::PanelMatmulRows(type, panels, w_row_bytes, ActivationView(type, qx, t, k), n0, n1,
                                y, ldy);
  }
#endif
  (void)panels, (void)w_row_bytes, (void)qx, (void)t, (void)k, (void)n0, (void)n1, (void)y, (void)ldy;
  CHECK(false && "panel matmul: no panel kernel for this type on this target");
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace anymoe::kernels {
namespace {

size_t RoundUp64(size_t n) { return (n + 63) / 64 * 64; }

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

void CheckShape(DType type, int64_t t, int64_t k) {
  CHECK(IsQuantMatmulSupported(type));
  CHECK(t >= 0 && k >= 0);
  if (!IsHalf(type)) CHECK(k % Info(type).block_elems == 0);
}

}  // namespace

HWY_EXPORT(IntegerMatmulMaxRowsImpl);
HWY_EXPORT(DecodeMatmulKernelImpl);
HWY_EXPORT(QuantizeActivationsImpl);
HWY_EXPORT(QuantMatmulRowsImpl);
HWY_EXPORT(HasPanelKernelsImpl);
HWY_EXPORT(PanelMatmulRowsImpl);

bool IsQuantMatmulSupported(DType weight_type) {
  switch (weight_type) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kF16:
    case DType::kBF16:
      return true;
    default:  // the low-bit types: those the portable kernels unpack
      return HWY_STATIC_DISPATCH(UnpackPassesImpl)(weight_type) > 0;
  }
}

int64_t IntegerMatmulMaxRows(DType weight_type) {
  return HWY_DYNAMIC_DISPATCH(IntegerMatmulMaxRowsImpl)(weight_type);
}

const char* DecodeMatmulKernel(DType weight_type) {
  return HWY_DYNAMIC_DISPATCH(DecodeMatmulKernelImpl)(weight_type);
}

size_t QuantizedActivationBytes(DType weight_type, int64_t t, int64_t k) {
  CheckShape(weight_type, t, k);
  const size_t n = size_t(t) * size_t(k);
  if (IsHalf(weight_type)) return n * sizeof(float);
  return RoundUp64(n) + 3 * RoundUp64(n / kActivationBlock * sizeof(float));
}

QuantizedActivations ActivationView(DType weight_type, const void* buffer, int64_t t, int64_t k) {
  CheckShape(weight_type, t, k);
  QuantizedActivations v;
  v.t = t;
  v.k = k;
  const auto* base = static_cast<const uint8_t*>(buffer);
  if (IsHalf(weight_type)) {
    v.f32 = static_cast<const float*>(buffer);
    return v;
  }
  const size_t n = size_t(t) * size_t(k);
  const size_t scale_bytes = RoundUp64(n / kActivationBlock * sizeof(float));
  v.qs = reinterpret_cast<const int8_t*>(base);
  v.d = reinterpret_cast<const float*>(base + RoundUp64(n));
  v.s = reinterpret_cast<const float*>(base + RoundUp64(n) + scale_bytes);
  v.sum = reinterpret_cast<const int32_t*>(base + RoundUp64(n) + 2 * scale_bytes);
  static_assert(sizeof(int32_t) == sizeof(float));
  return v;
}

void QuantizeActivations(DType weight_type, const float* x, int64_t t, int64_t k, void* buffer) {
  QuantizeActivationRows(weight_type, x, t, k, 0, t, buffer);
}

void QuantizeActivationRows(DType weight_type, const float* x, int64_t t, int64_t k, int64_t r0,
                            int64_t r1, void* buffer) {
  CheckShape(weight_type, t, k);
  CHECK(0 <= r0 && r0 <= r1 && r1 <= t);
  HWY_DYNAMIC_DISPATCH(QuantizeActivationsImpl)(weight_type, x, t, k, r0, r1, buffer);
}

void QuantMatmulRows(DType weight_type, const uint8_t* w, size_t w_row_bytes, const void* qx,
                     int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  CheckShape(weight_type, t, k);
  CHECK(0 <= n0 && n0 <= n1);
  HWY_DYNAMIC_DISPATCH(QuantMatmulRowsImpl)(weight_type, w, w_row_bytes, qx, t, k, n0, n1, y, ldy);
}

bool HasPanelKernels(DType weight_type) {
  return HWY_DYNAMIC_DISPATCH(HasPanelKernelsImpl)(weight_type);
}

void PanelMatmulRows(DType weight_type, const uint8_t* panels, size_t w_row_bytes, const void* qx,
                     int64_t t, int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  CheckShape(weight_type, t, k);  // the target's kernel CHECKs that it has panels
  CHECK(0 <= n0 && n0 <= n1 && n0 % kPanelRows == 0 && n1 % kPanelRows == 0);
  HWY_DYNAMIC_DISPATCH(PanelMatmulRowsImpl)(weight_type, panels, w_row_bytes, qx, t, k, n0, n1, y,
                                            ldy);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
