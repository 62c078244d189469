// The DSA lightning indexer on the CPU: f32 scores of every cached key for one
// query (weighted sum over indexer heads of ReLU'd dot products) and the top-k
// selection, ties to the lower key index.
#pragma once

#include <cstdint>

namespace anymoe::cpu {

// q [n_heads, dim]; key u (u < n_keys) is row key_rows[u] of `keys` (row stride
// dim); head_weights [n_heads]. Writes the min(topk, n_keys) best positions u,
// ascending, to `out`; returns how many. `scores` is scratch of n_keys floats,
// `order` of n_keys ints.
int64_t IndexerSelect(const float* q, const float* keys, const int32_t* key_rows,
                      const float* head_weights, int64_t n_heads, int64_t dim, int64_t n_keys,
                      float scale, int64_t topk, float* scores, int32_t* order, int32_t* out);

}  // namespace anymoe::cpu
