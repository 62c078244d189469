// Compiled once per Highway target; see dot.cc for the dispatch pattern. The
// tile layout puts two consecutive elements of a key in one int32 lane, so one
// vpmaddwd / vpdpwssd (or the pairwise widening multiply-add of other targets)
// adds two products per key per lane against one broadcast pair of the query.
// AVX3_DL (AVX-512 VNNI) is only generated on request in Highway 1.0.3.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/indexer_int16.cc"
#include "backends/cpu/kernels/indexer_int16.h"

#include <algorithm>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::ScalableTag<int32_t>;
using VI = hn::Vec<DI>;
using DF = hn::Repartition<float, DI>;
using VF = hn::Vec<DF>;

int64_t TileKeysImpl() { return 2 * int64_t(hn::Lanes(DI())); }

// Where the int16 path beat the exact one end to end (docs/benchmarks.md):
// the target on which PairDot issues 512-bit vpdpwssd, twice an f32 FMA's
// products per instruction. vpmaddwd (AVX2) measured slower; other targets
// are unmeasured.
bool PaysImpl() { return HWY_TARGET == HWY_AVX3_DL; }

#if HWY_TARGET == HWY_SCALAR

// One lane: the pairs one key at a time.
void ScoresImpl(const int32_t* pairs, int64_t pair_stride, const float* head_scale,
                int64_t hs_stride, const float* w, int64_t w_stride, int64_t nq, int64_t n_heads,
                int64_t dim, const IndexerKeyQuant& keys, int64_t u0, int64_t u1, float* scores,
                int64_t score_stride) {
  const int64_t tile_keys = TileKeysImpl(), n_pairs = IndexerInt16Pairs(dim);
  for (int64_t t0 = u0; t0 < u1; t0 += tile_keys) {
    const int16_t* kt = keys.tiles + t0 * n_pairs * 2;
    for (int64_t j = 0; j < tile_keys; ++j) {
      for (int64_t qi = 0; qi < nq; ++qi) {
        float total = 0.0f;
        for (int64_t h = 0; h < n_heads; ++h) {
          const int32_t* q = pairs + qi * pair_stride + h * n_pairs;
          int32_t dot = 0;
          for (int64_t p = 0; p < n_pairs; ++p) {
            const int16_t* k = kt + (p * tile_keys + j) * 2;
            dot += int32_t(int16_t(q[p] & 0xffff)) * k[0] + int32_t(int16_t(q[p] >> 16)) * k[1];
          }
          total +=
              w[qi * w_stride + h] * std::max(0.0f, float(dot) * head_scale[qi * hs_stride + h]);
        }
        scores[qi * score_stride + t0 - u0 + j] = total * keys.scale[t0 + j];
      }
    }
  }
}

#else

using D16 = hn::Repartition<int16_t, DI>;
using V16 = hn::Vec<D16>;

// acc + per int32 lane i: q.lo * k[2i] + q.hi * k[2i + 1], q one query pair.
HWY_INLINE VI PairDot(VI acc, V16 k, const int32_t* q) {
#if HWY_TARGET == HWY_AVX3_DL
  __m512i r = acc.raw;
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(r) : "v"(k.raw), "m"(*q));
  return VI{r};
#else
  const DI di;
  const V16 qv = hn::BitCast(D16(), hn::Set(di, *q));
#if HWY_ARCH_X86
  VI unused = hn::Zero(di);  // x86 keeps pairwise sums in sum0 (vpmaddwd)
  return hn::ReorderWidenMulAccumulate(di, qv, k, acc, unused);
#else
  VI odd = hn::Zero(di);
  const VI even = hn::ReorderWidenMulAccumulate(di, qv, k, hn::Zero(di), odd);
  return hn::Add(acc, hn::RearrangeToOddPlusEven(even, odd));
#endif
#endif
}

// Heads per register tile, two vectors of keys each: 8 heads where the
// target has 32 vector registers, 4 on x86 targets below AVX-512 (16: eight
// accumulators, two key vectors, the broadcast pair and vpmaddwd's products;
// with 6 heads the accumulators spill).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kTileHeads = 4;
#else
constexpr int kTileHeads = 8;
#endif

// total += w * max(0, float(dot) * head_scale), lane-wise, both key vectors.
HWY_INLINE void AddHead(float w, float head_scale, VI dot_a, VI dot_b, VF& total_a, VF& total_b) {
  const DF d;
  const VF zero = hn::Zero(d), wv = hn::Set(d, w), s = hn::Set(d, head_scale);
  const VF xa = hn::Mul(hn::ConvertTo(d, dot_a), s), xb = hn::Mul(hn::ConvertTo(d, dot_b), s);
  total_a = hn::Add(total_a, hn::Mul(wv, hn::Max(xa, zero)));
  total_b = hn::Add(total_b, hn::Mul(wv, hn::Max(xb, zero)));
}

// (total_a, total_b) += heads [0, kH) of one query (q: their pairs, row stride
// n_pairs) against a tile's two vectors of keys (kt: n_pairs rows).
template <int kH>
HWY_INLINE void AddHeads(const int32_t* q, int64_t n_pairs, const int16_t* kt, const float* w,
                         const float* hs, VF& total_a, VF& total_b) {
  const DI di;
  const D16 d16;
  const int64_t n16 = int64_t(hn::Lanes(d16));
  VI a0 = hn::Zero(di), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
  VI a4 = a0, b4 = a0, a5 = a0, b5 = a0, a6 = a0, b6 = a0, a7 = a0, b7 = a0;
  for (int64_t p = 0; p < n_pairs; ++p) {
    const int16_t* row = kt + p * 2 * n16;
    const V16 ka = hn::LoadU(d16, row), kb = hn::LoadU(d16, row + n16);
    a0 = PairDot(a0, ka, q + p);
    b0 = PairDot(b0, kb, q + p);
    if constexpr (kH > 1)
      a1 = PairDot(a1, ka, q + n_pairs + p), b1 = PairDot(b1, kb, q + n_pairs + p);
    if constexpr (kH > 2)
      a2 = PairDot(a2, ka, q + 2 * n_pairs + p), b2 = PairDot(b2, kb, q + 2 * n_pairs + p);
    if constexpr (kH > 3)
      a3 = PairDot(a3, ka, q + 3 * n_pairs + p), b3 = PairDot(b3, kb, q + 3 * n_pairs + p);
    if constexpr (kH > 4)
      a4 = PairDot(a4, ka, q + 4 * n_pairs + p), b4 = PairDot(b4, kb, q + 4 * n_pairs + p);
    if constexpr (kH > 5)
      a5 = PairDot(a5, ka, q + 5 * n_pairs + p), b5 = PairDot(b5, kb, q + 5 * n_pairs + p);
    if constexpr (kH > 6)
      a6 = PairDot(a6, ka, q + 6 * n_pairs + p), b6 = PairDot(b6, kb, q + 6 * n_pairs + p);
    if constexpr (kH > 7)
      a7 = PairDot(a7, ka, q + 7 * n_pairs + p), b7 = PairDot(b7, kb, q + 7 * n_pairs + p);
  }
  AddHead(w[0], hs[0], a0, b0, total_a, total_b);
  if constexpr (kH > 1) AddHead(w[1], hs[1], a1, b1, total_a, total_b);
  if constexpr (kH > 2) AddHead(w[2], hs[2], a2, b2, total_a, total_b);
  if constexpr (kH > 3) AddHead(w[3], hs[3], a3, b3, total_a, total_b);
  if constexpr (kH > 4) AddHead(w[4], hs[4], a4, b4, total_a, total_b);
  if constexpr (kH > 5) AddHead(w[5], hs[5], a5, b5, total_a, total_b);
  if constexpr (kH > 6) AddHead(w[6], hs[6], a6, b6, total_a, total_b);
  if constexpr (kH > 7) AddHead(w[7], hs[7], a7, b7, total_a, total_b);
}

// Heads [h, n_heads), `left` < kTileHeads of them, as one register tile.
template <int kH = kTileHeads - 1>
HWY_INLINE void AddLastHeads(int64_t left, const int32_t* q, int64_t n_pairs, const int16_t* kt,
                             const float* w, const float* hs, VF& total_a, VF& total_b) {
  if constexpr (kH > 0) {
    if (left == kH) return AddHeads<kH>(q, n_pairs, kt, w, hs, total_a, total_b);
    AddLastHeads<kH - 1>(left, q, n_pairs, kt, w, hs, total_a, total_b);
  }
}

void ScoresImpl(const int32_t* pairs, int64_t pair_stride, const float* head_scale,
                int64_t hs_stride, const float* w, int64_t w_stride, int64_t nq, int64_t n_heads,
                int64_t dim, const IndexerKeyQuant& keys, int64_t u0, int64_t u1, float* scores,
                int64_t score_stride) {
  const DF d;
  const int64_t n = int64_t(hn::Lanes(d)), tile_keys = 2 * n;
  const int64_t n_pairs = IndexerInt16Pairs(dim);
  for (int64_t t0 = u0; t0 < u1; t0 += tile_keys) {
    const int16_t* kt = keys.tiles + t0 * n_pairs * 2;
    const VF sk_a = hn::LoadU(d, keys.scale + t0), sk_b = hn::LoadU(d, keys.scale + t0 + n);
    for (int64_t qi = 0; qi < nq; ++qi) {
      const int32_t* q = pairs + qi * pair_stride;
      const float* wq = w + qi * w_stride;
      const float* hs = head_scale + qi * hs_stride;
      VF total_a = hn::Zero(d), total_b = hn::Zero(d);
      int64_t h = 0;
      for (; h + kTileHeads <= n_heads; h += kTileHeads) {
        AddHeads<kTileHeads>(q + h * n_pairs, n_pairs, kt, wq + h, hs + h, total_a, total_b);
      }
      AddLastHeads(n_heads - h, q + h * n_pairs, n_pairs, kt, wq + h, hs + h, total_a, total_b);
      float* out = scores + qi * score_stride + (t0 - u0);
      hn::StoreU(hn::Mul(total_a, sk_a), d, out);
      hn::StoreU(hn::Mul(total_b, sk_b), d, out + n);
    }
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace anymoe::kernels {

HWY_EXPORT(TileKeysImpl);
HWY_EXPORT(PaysImpl);
HWY_EXPORT(ScoresImpl);

namespace {

// The largest |value| such that dim products of two of them, summed, fit an
// int32 (pairs: dim rounded up to even).
int32_t Limit(int64_t dim) {
  const double even = double(2 * IndexerInt16Pairs(dim));
  return int32_t(std::min(32767.0, std::floor(std::sqrt(2147483647.0 / even))));
}

constexpr float kTameLow = 0x1p-20f, kTameHigh = 0x1p20f;

// max |x_i| over n values, or NaN if one is not finite.
float MaxAbs(const float* x, int64_t n) {
  float m = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    m = std::max(m, std::abs(x[i]));
  }
  return finite ? m : NAN;
}

bool Tame(float max_abs) {
  return max_abs == 0.0f || (max_abs >= kTameLow && max_abs <= kTameHigh);
}

// x * inv rounded to the nearest integer and clamped to [-limit, limit].
int16_t Quantize(float x, float inv, int32_t limit) {
  const long v = std::lrint(x * inv);
  return int16_t(std::clamp<long>(v, -limit, limit));
}

}  // namespace

int64_t IndexerInt16TileKeys() { return HWY_DYNAMIC_DISPATCH(TileKeysImpl)(); }

bool IndexerInt16Pays() { return HWY_DYNAMIC_DISPATCH(PaysImpl)(); }

int64_t IndexerInt16KeyElements(int64_t n_keys, int64_t dim) {
  const int64_t tile = IndexerInt16TileKeys();
  return (n_keys + tile - 1) / tile * tile * IndexerInt16Pairs(dim) * 2;
}

bool QuantizeIndexerKeys(const float* keys, const int32_t* key_rows, int64_t dim, int64_t u0,
                         int64_t u1, bool last, const IndexerKeyQuant& out) {
  const int64_t tile = IndexerInt16TileKeys(), n_pairs = IndexerInt16Pairs(dim);
  const int32_t limit = Limit(dim);
  const int64_t end = last ? (u1 + tile - 1) / tile * tile : u1;
  for (int64_t u = u0; u < end; ++u) {
    // Key u's pair p: tile u / tile, row p, lane u % tile.
    int16_t* base = out.tiles + (u / tile) * n_pairs * tile * 2 + (u % tile) * 2;
    const float* k = u < u1 ? keys + int64_t(key_rows[u]) * dim : nullptr;
    const float m = k ? MaxAbs(k, dim) : 0.0f;
    if (!Tame(m)) return false;
    const float inv = m == 0.0f ? 0.0f : float(limit) / m;
    int64_t abs_sum = 0;
    for (int64_t i = 0; i < 2 * n_pairs; ++i) {
      const int16_t v = i < dim && m != 0.0f ? Quantize(k[i], inv, limit) : int16_t(0);
      base[(i / 2) * tile * 2 + i % 2] = v;
      abs_sum += v < 0 ? -v : v;
    }
    out.scale[u] = m / float(limit);
    out.abs_sum[u] = float(abs_sum);
  }
  return true;
}

bool QuantizeIndexerQuery(const float* q, const float* w, int64_t n_heads, int64_t dim, float scale,
                          IndexerQueryQuant& out) {
  const float abs_scale = std::abs(scale);
  if (!(abs_scale >= kTameLow && abs_scale <= kTameHigh)) return false;
  const int64_t n_pairs = IndexerInt16Pairs(dim);
  const int32_t limit = Limit(dim);
  // delta: the rounding of x / s to an integer, plus the f32 error of x * inv
  // and of s = max / limit (each a few ulps of limit).
  const double delta = 0.5 + 4.0 * 0x1p-24 * limit;
  // f32 rounding of the exact kernel (dim multiply-adds, scale, weight, the
  // head sum) and of this one (conversion, head_scale, weight, head sum, s_k),
  // relative to sum_h |w_h scale| |q_h|_1 |k|_inf.
  const double rounding = double(dim + 2 * n_heads + 16) * 0x1p-24;
  double p = 0, r = 0;
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* qh = q + h * dim;
    int32_t* pairs = out.pairs + h * n_pairs;
    const float m = MaxAbs(qh, dim);
    const float wa = std::abs(w[h]);
    if (!Tame(m) || !(wa == 0.0f || (wa >= 0x1p-40f && wa <= 0x1p40f))) return false;
    const float inv = m == 0.0f ? 0.0f : float(limit) / m;
    const float sq = m / float(limit);
    int64_t abs_sum = 0;
    for (int64_t pi = 0; pi < n_pairs; ++pi) {
      const int64_t i = 2 * pi;
      const int16_t lo = m != 0.0f ? Quantize(qh[i], inv, limit) : int16_t(0);
      const int16_t hi = m != 0.0f && i + 1 < dim ? Quantize(qh[i + 1], inv, limit) : int16_t(0);
      pairs[pi] = int32_t(uint32_t(uint16_t(lo)) | uint32_t(uint16_t(hi)) << 16);
      abs_sum += (lo < 0 ? -lo : lo) + (hi < 0 ? -hi : hi);
    }
    out.head_scale[h] = sq * scale;
    const double coef = double(wa) * abs_scale * sq;
    const double q1 = double(abs_sum);
    p += coef *
         (delta * q1 + delta * delta * double(dim) + rounding * (limit + 1) * (q1 + double(dim)));
    r += coef * delta;
  }
  // Slack for the f32 arithmetic of the bound itself and of approx +- bound.
  constexpr double kSlack = 1.0 + 0x1p-6;
  out.bound_p = float(p * kSlack);
  out.bound_r = float(r * kSlack);
  return true;
}

void IndexerInt16Scores(const int32_t* pairs, int64_t pair_stride, const float* head_scale,
                        int64_t hs_stride, const float* w, int64_t w_stride, int64_t nq,
                        int64_t n_heads, int64_t dim, const IndexerKeyQuant& keys, int64_t u0,
                        int64_t u1, float* scores, int64_t score_stride) {
  HWY_DYNAMIC_DISPATCH(ScoresImpl)
  (pairs, pair_stride, head_scale, hs_stride, w, w_stride, nq, n_heads, dim, keys, u0, u1, scores,
   score_stride);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
