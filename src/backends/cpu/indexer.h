// The DSA lightning indexer's top-k on the CPU: the `topk` best scored
// positions of one query, ties to the lower position (the scores themselves
// come from kernels/indexer_scores.h), from exact scores or from bounded
// approximations (kernels/indexer_int16.h) with exact scores for the few keys
// the bounds leave undecided.
#pragma once

#include <cstdint>
#include <functional>

namespace anymoe::cpu {

// Writes the min(topk, n_keys) positions u < n_keys with the largest
// scores[u] (ties to the lower u), ascending, to `out`; returns how many.
// `order` is scratch of n_keys ints. Linear in n_keys (a selection, not a sort).
int64_t SelectTopK(const float* scores, int64_t n_keys, int64_t topk, int32_t* order,
                   int32_t* out);

// Scratch of SelectTopKWithBounds, each array n_keys long.
struct BoundedSelectScratch {
  float* lower = nullptr;
  float* upper = nullptr;
  int32_t* sure = nullptr;  // positions surely selected, ascending
  int32_t* band = nullptr;  // positions the bounds leave undecided, ascending
  float* band_scores = nullptr;
  int32_t* order = nullptr;
};

// Writes what SelectTopK writes for the exact scores s[u], u < n_keys > topk,
// given approximations with |s[u] - approx[u]| <= bound[u]. With L the topk-th
// largest approx - bound and U the (topk + 1)-th largest approx + bound, a key
// with approx - bound > U is selected (at most topk - 1 others can beat it), a
// key with approx + bound < L is not (topk keys surely beat it), and only the
// rest, the band, is scored exactly: score_exactly(positions, n, scores).
// Returns topk; *band_size: how many keys were scored exactly.
int64_t SelectTopKWithBounds(
    const float* approx, const float* bound, int64_t n_keys, int64_t topk,
    const std::function<void(const int32_t*, int64_t, float*)>& score_exactly,
    const BoundedSelectScratch& scratch, int32_t* out, int64_t* band_size);

}  // namespace anymoe::cpu
