// The DSA lightning indexer's scores on the CPU, the O(context) part of every
// DSA step (GLM-5: 32 heads x 128 dims per key, 32K keys at a 32K context):
// one query at a time vectorised across the heads (decode), or a block of
// queries against tiles of keys vectorised across the keys (prefill), with the
// same bits either way.
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

// Floats of scratch IndexerScoresQueries needs for keys of `dim` elements: one
// tile of keys transposed to dim-major, for the dispatched target.
int64_t IndexerTileFloats(int64_t dim);

// IndexerScores for `nq` queries at once, bit for bit: query j is row j of
// `q` ([n_heads, dim] row-major, row stride q_stride floats), with head weights
// head_w + j * w_stride and scores[j * score_stride + u - u0] for u in [u0, u1).
// Each tile of keys is transposed once into `tile` (IndexerTileFloats(dim)
// floats) and scored against every query while it is in L1; a vector holds
// one head's dot products with a tile's keys, so the heads' weighted sum needs
// no horizontal reduction. Per key and head it is the same multiply-add chain
// over dim in order, and the same head sum in order, as IndexerScores.
void IndexerScoresQueries(const float* q, int64_t q_stride, const float* head_w, int64_t w_stride,
                          int64_t nq, int64_t n_heads, int64_t dim, const float* keys,
                          const int32_t* key_rows, int64_t u0, int64_t u1, float scale,
                          float* scores, int64_t score_stride, float* tile);

}  // namespace anymoe::kernels
