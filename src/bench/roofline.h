// The decode roofline: how many bytes of weights one generated token reads, and
// so the fastest decoding a memory bandwidth allows. Decoding one token reads
// every weight it multiplies by exactly once, which for a MoE is all shared
// weights plus only the k of E routed experts the router picks.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "formats/tensor_source.h"
#include "models/model_config.h"

namespace anymoe {

// What a tensor is to the roofline, told from its GGUF or HF name.
enum class WeightRole {
  kEmbedding,     // token_embd.weight / *embed_tokens.weight: one row read per token
  kRoutedExpert,  // blk.N.ffn_*_exps.* / *.experts.* (not shared experts)
  kOther,         // attention, norms, router, shared experts, dense MLPs, output head
};
WeightRole ClassifyWeight(std::string_view name);

// Weight bytes of a model split by role, and the bytes one decoded token reads:
//
//   per_token = other + embedding_row + routed_experts * experts_per_token / num_experts
//
// `other` includes the output head. With tied embeddings the head multiplies
// by the whole table, so the table counts in full instead of one row. KV-cache
// and activation traffic are not counted (small next to weights at short
// context).
struct DecodeBytes {
  uint64_t other = 0;
  uint64_t embedding = 0;       // the whole table
  uint64_t embedding_row = 0;   // one row of it (table bytes / rows)
  uint64_t routed_experts = 0;  // all routed experts of all layers
  int64_t experts_per_token = 0;
  int64_t num_experts = 0;
  bool tied_embeddings = false;

  double routed_fraction() const {
    return num_experts > 0 ? double(experts_per_token) / double(num_experts) : 0.0;
  }
  double per_token() const;
};

// Sums `tensors` by role. Errors when the file has routed-expert tensors but the
// config no experts, or no embedding table.
Expected<DecodeBytes> DecodeBytesPerToken(const TensorSource& tensors, const ModelConfig& config);

struct Roofline {
  double bandwidth_gbs = 0;    // read bandwidth, 1e9 bytes/s
  double bytes_per_token = 0;  // DecodeBytes::per_token()
  // Tokens/s if decoding did nothing but read its weights at `bandwidth_gbs`.
  double bound_tps() const {
    return bytes_per_token > 0 ? bandwidth_gbs * 1e9 / bytes_per_token : 0;
  }
  // Measured tokens/s as a percentage of the bound.
  double percent_of_bound(double tps) const {
    const double bound = bound_tps();
    return bound > 0 ? 100.0 * tps / bound : 0;
  }
};

}  // namespace anymoe
