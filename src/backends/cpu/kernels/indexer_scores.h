// The DSA lightning indexer's scores on the CPU, vectorised across the indexer
// heads: one query against a run of cached keys, the O(context) part of every
// DSA step (GLM-5: 32 heads x 128 dims per key, 32K keys at a 32K context).
#pragma once

#include <cstdint>

namespace anymoe::kernels {

// Floats per dim of a query laid out by IndexerQueryLayout: n_heads rounded up
// to whole vectors of the dispatched target.
int64_t IndexerHeadSlots(int64_t n_heads);

// q [n_heads, dim] -> q_t [dim, IndexerHeadSlots(n_heads)] (the padding zero).
void IndexerQueryLayout(const float* q, int64_t n_heads, int64_t dim, float* q_t);

// scores[u - u0] = sum_h head_w[h] * max(0, scale * <q_h, key u>) for u in [u0, u1),
// key u being row key_rows[u] of `keys` (row stride dim). Each dot product is
// one multiply-add chain over dim in order and the heads are summed in order,
// so a key's score does not depend on u0, u1 or the other keys. n_heads <= 1024.
void IndexerScores(const float* q_t, const float* head_w, int64_t n_heads, int64_t dim,
                   const float* keys, const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                   float* scores);

}  // namespace anymoe::kernels
