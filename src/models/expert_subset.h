// The routed experts a model keeps of each MoE layer of its file (expert
// pruning, --expert-prune): the model is then one with `kept_per_layer()`
// experts per layer, expert j of layer l being the file's expert kept[l][j].
// The router's rows (and selection bias) are those of the kept experts, so the
// routing of the architecture (softmax then top-k, or sigmoid + bias with
// group-limited top-k) runs unchanged over them: exactly the routing of the
// full model with the pruned experts' scores at -inf.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "models/model_config.h"

namespace anymoe {

struct ExpertSubset {
  int64_t file_experts = 0;                // routed experts per layer in the file
  std::vector<std::vector<int32_t>> kept;  // [layer]: file expert ids, ascending; empty: dense layer

  int64_t kept_per_layer() const;
  // The kept experts of `layer` (empty for a layer the subset does not name).
  std::span<const int32_t> layer(int64_t layer) const;
  // An error ("prune_invalid") unless the subset fits `config` (the file's,
  // unpruned): every MoE layer named with the same count of distinct
  // ascending ids in range, at least experts_per_token of them, and under
  // group-limited routing the same count in every group (at least two: a
  // group's score is the sum of its two best).
  Status Check(const ModelConfig& config) const;
  // `config` (the file's) as the pruned model's.
  void ApplyTo(ModelConfig& config) const { config.moe.num_experts = kept_per_layer(); }
};

}  // namespace anymoe
