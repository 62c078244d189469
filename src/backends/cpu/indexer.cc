#include "backends/cpu/indexer.h"

#include <algorithm>
#include <numeric>

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

}  // namespace anymoe::cpu
