#include "backends/cpu/kpool.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace anymoe::cpu {

void KPoolSelect(const KPoolParams& p, int64_t t, int64_t n_past, const float* q, const float* w,
                 const float* rows, std::span<int32_t> selection, std::span<int32_t> counts) {
  const int64_t P = p.pool, d = p.head_dim, stride = KPoolStride(p);
  const int64_t n_pools = (n_past + t) / P, keep = p.topk / P;
  // Pooled keys: per channel, softmax over the pool's tokens of z + ape.
  std::vector<float> pooled(size_t(n_pools * d)), logits(static_cast<size_t>(P));
  for (int64_t pl = 0; pl < n_pools; ++pl) {
    for (int64_t c = 0; c < d; ++c) {
      float mx = -INFINITY;
      for (int64_t i = 0; i < P; ++i) {
        logits[size_t(i)] = rows[(pl * P + i) * 2 * d + d + c] + p.ape[i * d + c];
        mx = std::max(mx, logits[size_t(i)]);
      }
      float sum = 0;
      for (int64_t i = 0; i < P; ++i) sum += (logits[size_t(i)] = std::exp(logits[size_t(i)] - mx));
      float acc = 0;
      for (int64_t i = 0; i < P; ++i) acc += (logits[size_t(i)] / sum) * rows[(pl * P + i) * 2 * d + c];
      pooled[size_t(pl * d + c)] = acc;
    }
  }
  std::vector<float> score(static_cast<size_t>(n_pools));
  std::vector<int32_t> order(static_cast<size_t>(n_pools));
  for (int64_t r = 0; r < t; ++r) {
    const int64_t visible = n_past + r + 1;
    const int64_t selectable = visible / P;  // complete pools ending at or before the query
    for (int64_t pl = 0; pl < selectable; ++pl) {
      float s = 0;
      for (int64_t h = 0; h < p.heads; ++h) {
        const float* qh = q + (r * p.heads + h) * d;
        float dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += qh[c] * pooled[size_t(pl * d + c)];
        s += w[r * p.heads + h] * std::max(dot * p.scale, 0.0f);
      }
      score[size_t(pl)] = s;
    }
    const int64_t n_keep = std::min(keep, selectable);
    std::iota(order.begin(), order.begin() + selectable, 0);
    std::partial_sort(order.begin(), order.begin() + n_keep, order.begin() + selectable,
                      [&](int32_t a, int32_t b) {
                        return score[size_t(a)] > score[size_t(b)] ||
                               (score[size_t(a)] == score[size_t(b)] && a < b);
                      });
    std::sort(order.begin(), order.begin() + n_keep);
    int32_t* out = selection.data() + r * stride;
    int64_t n = 0;
    for (int64_t i = 0; i < n_keep; ++i) {
      for (int64_t j = 0; j < P; ++j) out[n++] = int32_t(order[size_t(i)] * P + j);
    }
    if (p.tail) {
      for (int64_t pos = selectable * P; pos < visible; ++pos) out[n++] = int32_t(pos);
    }
    counts[size_t(r)] = int32_t(n);
  }
}

}  // namespace anymoe::cpu
