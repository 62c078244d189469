// The DSA lightning indexer's top-k on the CPU: the `topk` best scored
// positions of one query, ties to the lower position (the scores themselves
// come from kernels/indexer_scores.h).
#pragma once

#include <cstdint>

namespace anymoe::cpu {

// Writes the min(topk, n_keys) positions u < n_keys with the largest
// scores[u] (ties to the lower u), ascending, to `out`; returns how many.
// `order` is scratch of n_keys ints. Linear in n_keys (a selection, not a sort).
int64_t SelectTopK(const float* scores, int64_t n_keys, int64_t topk, int32_t* order,
                   int32_t* out);

}  // namespace anymoe::cpu
