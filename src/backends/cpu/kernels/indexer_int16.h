// The DSA lightning indexer's scores in int16, each with a bound on its
// distance from the exact f32 score (kernels/indexer_scores.h): a prefill
// chunk at a long context scores every query against every key, and int16
// pairs multiply-add twice as many products per instruction as f32 (vpdpwssd,
// vpmaddwd). The bound lets the caller decide most keys from the approximate
// score alone and score exactly only those near the top-k threshold, so the
// selection is the exact one (cpu/indexer.h, SelectTopKWithBounds).
//
// Quantisation: a key k (dim floats) becomes k' = round(k / s_k) in
// [-B, B] with s_k = max|k| / B, a query head likewise with its own s_q; B is
// the largest value for which `dim` products of two such values cannot
// overflow the int32 sum (4095 for GLM-5's 128 dims). For one head,
//   |<q, k> - s_q s_k <q', k'>| <= s_q s_k (delta (|q'|_1 + |k'|_1) + delta^2 dim)
// with delta a hair over 1/2 (the rounding of q / s_q); summed over the heads
// with |w_h scale|, plus the f32 rounding of both computations, this is
//   bound(key) = (P + R |k'|_1) s_k + tau
// with P and R per query (IndexerQueryQuant) and tau an absolute term that
// covers underflow. The bound holds only for "tame" values: finite, with
// max|q_h|, max|k| zero or in [2^-20, 2^20], |w_h| zero or in [2^-40, 2^40] and
// |scale| in [2^-20, 2^20] (no product under- or overflows in a way the
// relative terms miss); the quantisers report anything else and the caller
// scores exactly.
#pragma once

#include <cstdint>

namespace anymoe::kernels {

// Keys per tile of the quantised key layout on the dispatched target.
int64_t IndexerInt16TileKeys();

// True when the dispatched target scores int16 pairs fast enough for the
// bounded path to beat the exact one (measured: AVX-512 VNNI).
bool IndexerInt16Pays();

// int16 pairs per key or query head: dim rounded up to even, halved.
inline int64_t IndexerInt16Pairs(int64_t dim) { return (dim + 1) / 2; }

// int16 elements of quantised keys for n_keys keys: whole tiles of
// IndexerInt16TileKeys() keys, each IndexerInt16Pairs(dim) rows of tile-keys
// pairs (a pair: two consecutive elements of one key).
int64_t IndexerInt16KeyElements(int64_t n_keys, int64_t dim);

// The quantised keys of one IndexerTopK call and their bound terms.
struct IndexerKeyQuant {
  int16_t* tiles = nullptr;  // IndexerInt16KeyElements(n_keys, dim)
  float* scale = nullptr;    // s_k per key (0 for an all-zero key)
  float* abs_sum = nullptr;  // |k'|_1 per key (an integer below 2^24)
};

// Quantises keys u in [u0, u1) (key u: row key_rows[u] of `keys`, row stride
// dim); u0 a multiple of IndexerInt16TileKeys(). A tile's keys past u1 are
// written as zeros when u1 ends the call's keys (`last`). Returns false if a
// key is not tame (then nothing else of the call may use the quantised keys).
bool QuantizeIndexerKeys(const float* keys, const int32_t* key_rows, int64_t dim, int64_t u0,
                         int64_t u1, bool last, const IndexerKeyQuant& out);

// One query quantised: its heads' int16 pairs (each two values in one int32,
// low half first, for a broadcast), the per-head factor s_q * scale that turns
// an int32 dot into a score, and the bound's per-query terms.
struct IndexerQueryQuant {
  int32_t* pairs = nullptr;     // [n_heads, IndexerInt16Pairs(dim)]
  float* head_scale = nullptr;  // [n_heads]
  float bound_p = 0, bound_r = 0;
};

// Quantises query q [n_heads, dim] with head weights w [n_heads]. Returns
// false if the query, its weights or `scale` are not tame.
bool QuantizeIndexerQuery(const float* q, const float* w, int64_t n_heads, int64_t dim, float scale,
                          IndexerQueryQuant& out);

// The absolute term tau of every bound.
inline constexpr float kIndexerBoundFloor = 0x1p-60f;

// Approximate scores of nq quantised queries (query j: pairs + j * pair_stride
// int32s, head_scale + j * hs_stride, head weights w + j * w_stride) against
// keys [u0, u1) of `keys` (u0 a multiple of the tile size):
//   scores[j * score_stride + u - u0] = s_k * sum_h w_h * max(0, dot'_h * head_scale_h)
// with dot'_h the exact int32 dot of the quantised head and key.
void IndexerInt16Scores(const int32_t* pairs, int64_t pair_stride, const float* head_scale,
                        int64_t hs_stride, const float* w, int64_t w_stride, int64_t nq,
                        int64_t n_heads, int64_t dim, const IndexerKeyQuant& keys, int64_t u0,
                        int64_t u1, float* scores, int64_t score_stride);

}  // namespace anymoe::kernels
