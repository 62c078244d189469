// Compiled once per Highway target; see dot.cc for the dispatch pattern.
// IndexerScores lays the query out dim-major so that one broadcast key element
// meets a vector of heads: no horizontal sums, and four keys share each load of
// the query. IndexerScoresQueries turns it around for a block of queries: a
// tile of keys transposed once meets one broadcast query element per head, so
// a vector holds one head's dots with a tile's keys and the weighted head sum
// runs lane-wise (the one-query kernel sums its heads one scalar at a time).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/indexer_scores.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>

#include "core/check.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t HeadSlotsImpl(int64_t n_heads) {
  const int64_t two = 2 * int64_t(hn::Lanes(hn::ScalableTag<float>()));
  return (n_heads + two - 1) / two * two;
}

// dots[j * slots + c0 + i] = <q head c0 + i, k_j> for the 2 vectors of heads at
// c0 and kKeys keys (kKeys is 4 or 1; the chains are the same either way).
template <int kKeys>
HWY_INLINE void HeadDots(const float* q_t, int64_t slots, int64_t c0, int64_t dim,
                         const float* const* k, float* dots) {
  const hn::ScalableTag<float> d;
  const int64_t n = int64_t(hn::Lanes(d));
  auto a0 = hn::Zero(d), b0 = hn::Zero(d), a1 = hn::Zero(d), b1 = hn::Zero(d);
  auto a2 = hn::Zero(d), b2 = hn::Zero(d), a3 = hn::Zero(d), b3 = hn::Zero(d);
  for (int64_t i = 0; i < dim; ++i) {
    const float* row = q_t + i * slots + c0;
    const auto qa = hn::LoadU(d, row), qb = hn::LoadU(d, row + n);
    const auto k0 = hn::Set(d, k[0][i]);
    a0 = hn::MulAdd(qa, k0, a0);
    b0 = hn::MulAdd(qb, k0, b0);
    if constexpr (kKeys == 4) {
      const auto k1 = hn::Set(d, k[1][i]), k2 = hn::Set(d, k[2][i]), k3 = hn::Set(d, k[3][i]);
      a1 = hn::MulAdd(qa, k1, a1);
      b1 = hn::MulAdd(qb, k1, b1);
      a2 = hn::MulAdd(qa, k2, a2);
      b2 = hn::MulAdd(qb, k2, b2);
      a3 = hn::MulAdd(qa, k3, a3);
      b3 = hn::MulAdd(qb, k3, b3);
    }
  }
  hn::StoreU(a0, d, dots + c0);
  hn::StoreU(b0, d, dots + c0 + n);
  if constexpr (kKeys == 4) {
    hn::StoreU(a1, d, dots + slots + c0);
    hn::StoreU(b1, d, dots + slots + c0 + n);
    hn::StoreU(a2, d, dots + 2 * slots + c0);
    hn::StoreU(b2, d, dots + 2 * slots + c0 + n);
    hn::StoreU(a3, d, dots + 3 * slots + c0);
    hn::StoreU(b3, d, dots + 3 * slots + c0 + n);
  }
}

// The heads' weighted ReLU'd dots summed in head order.
HWY_INLINE float WeightedSum(const float* dots, const float* head_w, int64_t n_heads, float scale) {
  float total = 0.0f;
  for (int64_t h = 0; h < n_heads; ++h) total += head_w[h] * std::max(0.0f, dots[h] * scale);
  return total;
}

void ScoresImpl(const float* q_t, const float* head_w, int64_t n_heads, int64_t dim,
                const float* keys, const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                float* scores) {
  const int64_t slots = HeadSlotsImpl(n_heads);
  const int64_t step = 2 * int64_t(hn::Lanes(hn::ScalableTag<float>()));
  // Four keys' dots on the stack, for up to 2048 head slots (configs allow
  // 1024 heads, GLM-5 has 32).
  constexpr int64_t kMaxSlots = 2048;
  CHECK(slots <= kMaxSlots);
  HWY_ALIGN float dots[4 * kMaxSlots];
  const float* k[4];
  int64_t u = u0;
  for (; u + 4 <= u1; u += 4) {
    for (int j = 0; j < 4; ++j) k[j] = keys + int64_t(key_rows[u + j]) * dim;
    for (int64_t c0 = 0; c0 < slots; c0 += step) HeadDots<4>(q_t, slots, c0, dim, k, dots);
    for (int j = 0; j < 4; ++j) {
      scores[u + j - u0] = WeightedSum(dots + j * slots, head_w, n_heads, scale);
    }
  }
  for (; u < u1; ++u) {
    k[0] = keys + int64_t(key_rows[u]) * dim;
    for (int64_t c0 = 0; c0 < slots; c0 += step) HeadDots<1>(q_t, slots, c0, dim, k, dots);
    scores[u - u0] = WeightedSum(dots, head_w, n_heads, scale);
  }
}

// Heads per register tile of ScoresQueriesImpl, two vectors of keys each: 8
// heads (16 accumulators) where the target has 32 vector registers, 6 on x86
// targets below AVX-512, which have 16.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kTileHeads = 6;
#else
constexpr int kTileHeads = 8;
#endif

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

int64_t TileKeys() { return 2 * int64_t(hn::Lanes(DF())); }

// The transposed tile, and two vectors' room for a short tile's scores.
int64_t TileFloatsImpl(int64_t dim) { return (dim + 1) * TileKeys(); }

// WeightedSum's step lane by lane for the tile's two vectors of keys: total +=
// w * max(0, dot * scale), where std::max(0.0f, x) is (0 < x ? x : 0), +0 for
// -0 and NaN (as hn::Max may not be).
HWY_INLINE void AddHead(DF d, float w, VF scale, VF dot_a, VF dot_b, VF& total_a, VF& total_b) {
  const VF zero = hn::Zero(d), wv = hn::Set(d, w);
  const VF xa = hn::Mul(dot_a, scale), xb = hn::Mul(dot_b, scale);
  total_a = hn::Add(total_a, hn::Mul(wv, hn::IfThenElse(hn::Lt(zero, xa), xa, zero)));
  total_b = hn::Add(total_b, hn::Mul(wv, hn::IfThenElse(hn::Lt(zero, xb), xb, zero)));
}

// One step of a head's chains with the tile's two vectors of keys.
HWY_INLINE void MulAdd2(VF q, VF ka, VF kb, VF& a, VF& b) {
  a = hn::MulAdd(q, ka, a);
  b = hn::MulAdd(q, kb, b);
}

// (total_a, total_b) += heads [0, kH) of `q` (row stride dim) against the
// tile's two vectors of keys (kt: dim rows of 2 vectors), in head order. Each
// head's dot with a key is the multiply-add chain of HeadDots, lane by lane.
template <int kH>
HWY_INLINE void AddHeads(const float* q, int64_t dim, const float* kt, const float* w,
                         float scale, VF& total_a, VF& total_b) {
  const DF d;
  const int64_t n = int64_t(hn::Lanes(d));
  auto a0 = hn::Zero(d), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
  auto a4 = a0, b4 = a0, a5 = a0, b5 = a0, a6 = a0, b6 = a0, a7 = a0, b7 = a0;
  for (int64_t i = 0; i < dim; ++i) {
    const float* row = kt + i * 2 * n;
    const auto ka = hn::LoadU(d, row), kb = hn::LoadU(d, row + n);
    MulAdd2(hn::Set(d, q[i]), ka, kb, a0, b0);
    if constexpr (kH > 1) MulAdd2(hn::Set(d, q[dim + i]), ka, kb, a1, b1);
    if constexpr (kH > 2) MulAdd2(hn::Set(d, q[2 * dim + i]), ka, kb, a2, b2);
    if constexpr (kH > 3) MulAdd2(hn::Set(d, q[3 * dim + i]), ka, kb, a3, b3);
    if constexpr (kH > 4) MulAdd2(hn::Set(d, q[4 * dim + i]), ka, kb, a4, b4);
    if constexpr (kH > 5) MulAdd2(hn::Set(d, q[5 * dim + i]), ka, kb, a5, b5);
    if constexpr (kH > 6) MulAdd2(hn::Set(d, q[6 * dim + i]), ka, kb, a6, b6);
    if constexpr (kH > 7) MulAdd2(hn::Set(d, q[7 * dim + i]), ka, kb, a7, b7);
  }
  const VF vs = hn::Set(d, scale);
  AddHead(d, w[0], vs, a0, b0, total_a, total_b);
  if constexpr (kH > 1) AddHead(d, w[1], vs, a1, b1, total_a, total_b);
  if constexpr (kH > 2) AddHead(d, w[2], vs, a2, b2, total_a, total_b);
  if constexpr (kH > 3) AddHead(d, w[3], vs, a3, b3, total_a, total_b);
  if constexpr (kH > 4) AddHead(d, w[4], vs, a4, b4, total_a, total_b);
  if constexpr (kH > 5) AddHead(d, w[5], vs, a5, b5, total_a, total_b);
  if constexpr (kH > 6) AddHead(d, w[6], vs, a6, b6, total_a, total_b);
  if constexpr (kH > 7) AddHead(d, w[7], vs, a7, b7, total_a, total_b);
}

// Heads [h, n_heads), fewer than kTileHeads, as one register tile.
HWY_INLINE void AddLastHeads(int64_t left, const float* q, int64_t dim, const float* kt,
                             const float* w, float scale, VF& total_a, VF& total_b) {
  switch (left) {
    case 1: return AddHeads<1>(q, dim, kt, w, scale, total_a, total_b);
    case 2: return AddHeads<2>(q, dim, kt, w, scale, total_a, total_b);
    case 3: return AddHeads<3>(q, dim, kt, w, scale, total_a, total_b);
    case 4: return AddHeads<4>(q, dim, kt, w, scale, total_a, total_b);
    case 5: return AddHeads<5>(q, dim, kt, w, scale, total_a, total_b);
    case 6: return AddHeads<6>(q, dim, kt, w, scale, total_a, total_b);
    case 7: return AddHeads<7>(q, dim, kt, w, scale, total_a, total_b);
    default: return;
  }
}

void ScoresQueriesImpl(const float* q, int64_t q_stride, const float* head_w, int64_t w_stride,
                       int64_t nq, int64_t n_heads, int64_t dim, const float* keys,
                       const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                       float* scores, int64_t score_stride, float* tile) {
  const DF d;
  const int64_t n = int64_t(hn::Lanes(d)), tile_keys = 2 * n;
  float* short_out = tile + dim * tile_keys;  // a short tile's two vectors of scores
  for (int64_t t0 = u0; t0 < u1; t0 += tile_keys) {
    const int64_t valid = std::min(tile_keys, u1 - t0);
    // Transpose: tile[i * tile_keys + j] = element i of key t0 + j (zero past u1).
    for (int64_t j = 0; j < valid; ++j) {
      const float* k = keys + int64_t(key_rows[t0 + j]) * dim;
      for (int64_t i = 0; i < dim; ++i) tile[i * tile_keys + j] = k[i];
    }
    for (int64_t j = valid; j < tile_keys; ++j) {
      for (int64_t i = 0; i < dim; ++i) tile[i * tile_keys + j] = 0.0f;
    }
    for (int64_t qi = 0; qi < nq; ++qi) {
      const float* qq = q + qi * q_stride;
      const float* w = head_w + qi * w_stride;
      VF total_a = hn::Zero(d), total_b = hn::Zero(d);
      int64_t h = 0;
      for (; h + kTileHeads <= n_heads; h += kTileHeads) {
        AddHeads<kTileHeads>(qq + h * dim, dim, tile, w + h, scale, total_a, total_b);
      }
      AddLastHeads(n_heads - h, qq + h * dim, dim, tile, w + h, scale, total_a, total_b);
      float* out = scores + qi * score_stride + (t0 - u0);
      if (valid == tile_keys) {
        hn::StoreU(total_a, d, out);
        hn::StoreU(total_b, d, out + n);
      } else {
        hn::StoreU(total_a, d, short_out);
        hn::StoreU(total_b, d, short_out + n);
        std::copy(short_out, short_out + valid, out);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/indexer_scores.h"

namespace anymoe::kernels {

HWY_EXPORT(HeadSlotsImpl);
HWY_EXPORT(ScoresImpl);
HWY_EXPORT(TileFloatsImpl);
HWY_EXPORT(ScoresQueriesImpl);

int64_t IndexerHeadSlots(int64_t n_heads) { return HWY_DYNAMIC_DISPATCH(HeadSlotsImpl)(n_heads); }

void IndexerQueryLayout(const float* q, int64_t n_heads, int64_t dim, float* q_t) {
  const int64_t slots = IndexerHeadSlots(n_heads);
  for (int64_t i = 0; i < dim; ++i) {
    float* row = q_t + i * slots;
    for (int64_t h = 0; h < n_heads; ++h) row[h] = q[h * dim + i];
    std::fill(row + n_heads, row + slots, 0.0f);
  }
}

void IndexerScores(const float* q_t, const float* head_w, int64_t n_heads, int64_t dim,
                   const float* keys, const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                   float* scores) {
  HWY_DYNAMIC_DISPATCH(ScoresImpl)(q_t, head_w, n_heads, dim, keys, key_rows, u0, u1, scale,
                                   scores);
}

int64_t IndexerTileFloats(int64_t dim) { return HWY_DYNAMIC_DISPATCH(TileFloatsImpl)(dim); }

void IndexerScoresQueries(const float* q, int64_t q_stride, const float* head_w, int64_t w_stride,
                          int64_t nq, int64_t n_heads, int64_t dim, const float* keys,
                          const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                          float* scores, int64_t score_stride, float* tile) {
  HWY_DYNAMIC_DISPATCH(ScoresQueriesImpl)(q, q_stride, head_w, w_stride, nq, n_heads, dim, keys,
                                          key_rows, u0, u1, scale, scores, score_stride, tile);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
