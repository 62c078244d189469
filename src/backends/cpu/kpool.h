// The KPool DSA indexer's selection (GLM-5.3-Flash) for one sequence on the
// host, in f32 as transformers computes it (shared/new-archs.md §1.6): the
// cached tokens fall into pools of `pool` consecutive positions; each complete
// pool's index key is a per-channel softmax(z + ape)-weighted sum of its
// tokens' keys; a query scores the pools that end at or before it with the
// ReLU heads, keeps the best topk / pool of them (ties to the lower pool) and,
// with `tail`, its own unfinished pool's positions. Selections are ascending.
#pragma once

#include <cstdint>
#include <span>

namespace anymoe::cpu {

struct KPoolParams {
  int64_t heads = 0, head_dim = 0, pool = 0, topk = 0;  // topk in tokens, a multiple of pool
  bool tail = true;
  float scale = 1.0f;            // head_dim^-1/2
  const float* ape = nullptr;    // [pool, head_dim]
};

// Widest selection: topk + pool - 1 with the tail, else topk.
inline int64_t KPoolStride(const KPoolParams& p) { return p.topk + (p.tail ? p.pool - 1 : 0); }

// q [t, heads, head_dim] and w [t, heads] (head weights, n_I^-1/2 applied) of
// the queries at positions n_past .. n_past + t - 1; `rows` [n_past + t, 2
// head_dim] the cached (key | gate score) of every position, in order.
// Writes each query's positions to selection [t, KPoolStride] and counts [t].
void KPoolSelect(const KPoolParams& p, int64_t t, int64_t n_past, const float* q, const float* w,
                 const float* rows, std::span<int32_t> selection, std::span<int32_t> counts);

}  // namespace anymoe::cpu
