#include "backends/cpu/indexer.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "core/check.h"

namespace anymoe::cpu {

int64_t SelectTopK(const float* scores, int64_t n_keys, int64_t topk, int32_t* order,
                   int32_t* out) {
  if (n_keys <= topk) {  // every visible key survives: DSA is a no-op here
    std::iota(out, out + n_keys, 0);
    return n_keys;
  }
  std::iota(order, order + n_keys, 0);
  // A strict total order (score descending, then position), so the first topk
  // after nth_element are exactly the set a full sort would put first.
  const auto better = [scores](int32_t a, int32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  };
  std::nth_element(order, order + topk - 1, order + n_keys, better);
  std::copy(order, order + topk, out);
  std::sort(out, out + topk);
  return topk;
}

int64_t SelectTopKWithBounds(
    const float* approx, const float* bound, int64_t n_keys, int64_t topk,
    const std::function<void(const int32_t*, int64_t, float*)>& score_exactly,
    const BoundedSelectScratch& scratch, int32_t* out, int64_t* band_size) {
  float* lower = scratch.lower;
  float* upper = scratch.upper;
  for (int64_t u = 0; u < n_keys; ++u) {
    lower[u] = approx[u] - bound[u];
    upper[u] = approx[u] + bound[u];
  }
  // nth_element reorders; the classification below recomputes the same sums.
  std::nth_element(lower, lower + topk - 1, lower + n_keys, std::greater<float>());
  std::nth_element(upper, upper + topk, upper + n_keys, std::greater<float>());
  const float lo_threshold = lower[topk - 1], up_threshold = upper[topk];
  int64_t n_sure = 0, n_band = 0;
  for (int64_t u = 0; u < n_keys; ++u) {
    if (approx[u] - bound[u] > up_threshold) {
      scratch.sure[n_sure++] = int32_t(u);
    } else if (approx[u] + bound[u] >= lo_threshold) {
      scratch.band[n_band++] = int32_t(u);
    }
  }
  *band_size = n_band;
  const int64_t wanted = topk - n_sure;  // at most topk keys have upper > U
  // The exact top-k lies within sure + band, so the band holds the rest.
  CHECK(wanted >= 0 && wanted <= n_band);
  int32_t* chosen = scratch.order;
  if (wanted > 0) {
    score_exactly(scratch.band, n_band, scratch.band_scores);
    // SelectTopK's order on the band: score descending, then position.
    const float* s = scratch.band_scores;
    std::iota(chosen, chosen + n_band, 0);
    const auto better = [s](int32_t a, int32_t b) { return s[a] != s[b] ? s[a] > s[b] : a < b; };
    std::nth_element(chosen, chosen + wanted - 1, chosen + n_band, better);
    for (int64_t i = 0; i < wanted; ++i) chosen[i] = scratch.band[chosen[i]];
    std::sort(chosen, chosen + wanted);
  }
  std::merge(scratch.sure, scratch.sure + n_sure, chosen, chosen + wanted, out);
  return topk;
}

}  // namespace anymoe::cpu
