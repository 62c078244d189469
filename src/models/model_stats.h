// Figures about a model that need no backend and no weights: parameter counts
// from the config (total, and active per token: only the routed experts a token
// uses), the KV cache per token (latent for MLA, with what full K/V would take),
// and the dtype mix of a file's tensors. `anymoe info` prints them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "formats/tensor_source.h"
#include "models/model_config.h"

namespace anymoe {

struct ParameterCounts {
  int64_t total = 0;
  // Weights one token multiplies by: everything but the unused routed experts and
  // the embedding table (a token reads one row of it).
  int64_t active = 0;
  int64_t routed_experts = 0;  // part of total
};
ParameterCounts CountParameters(const ModelConfig& config);

// Sum of the elements of every tensor in a file (cross-checks the config count).
int64_t CountTensorElements(const TensorSource& tensors);

struct DTypeUsage {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};
std::map<std::string, DTypeUsage> SummarizeDTypes(const TensorSource& tensors);

struct KvFootprint {
  int64_t values_per_token = 0;       // what anymoe caches, all layers
  int64_t full_kv_values_per_token = 0;  // per-head K and V, as a non-latent cache would
  // Fixed per sequence whatever its length: GLM-5.3's KDA conv rows and state.
  int64_t state_values_per_sequence = 0;
};
KvFootprint KvValuesPerToken(const ModelConfig& config);

// Multiply-adds one token's attention spends per cached key, all layers: the
// scores and the weighted sum of values per query head (GQA: head_dim each; MLA
// in its absorbed form: latent + rope for the scores, latent for the sum). On a
// DSA layer only the lightning indexer's heads x head_dim per key grow with the
// context once it is past index_topk (the attention itself stays at top-k
// keys), and a layer that reuses another's selection adds nothing.
int64_t AttentionMacsPerKey(const ModelConfig& config);

}  // namespace anymoe
