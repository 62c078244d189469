// Compiled once per Highway target; see dot.cc for the dispatch pattern. The
// query is laid out dim-major so that one broadcast key element meets a vector
// of heads: no horizontal sums, and four keys share each load of the query.
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

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/indexer_scores.h"

namespace anymoe::kernels {

HWY_EXPORT(HeadSlotsImpl);
HWY_EXPORT(ScoresImpl);

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

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
