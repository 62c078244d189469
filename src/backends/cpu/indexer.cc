#include "backends/cpu/indexer.h"

#include <algorithm>
#include <numeric>

namespace anymoe::cpu {

int64_t IndexerSelect(const float* q, const float* keys, const int32_t* key_rows,
                      const float* head_weights, int64_t n_heads, int64_t dim, int64_t n_keys,
                      float scale, int64_t topk, float* scores, int32_t* order, int32_t* out) {
  if (n_keys <= topk) {  // every visible key survives: DSA is a no-op here
    std::iota(out, out + n_keys, 0);
    return n_keys;
  }
  for (int64_t u = 0; u < n_keys; ++u) {
    const float* k = keys + int64_t(key_rows[u]) * dim;
    float total = 0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q + h * dim;
      float dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += qh[d] * k[d];
      total += head_weights[h] * std::max(0.0f, dot * scale);
    }
    scores[u] = total;
  }
  std::iota(order, order + n_keys, 0);
  std::partial_sort(order, order + topk, order + n_keys, [&](int32_t a, int32_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
  std::copy(order, order + topk, out);
  std::sort(out, out + topk);
  return topk;
}

}  // namespace anymoe::cpu
