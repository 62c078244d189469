// Records which experts every token chose in every MoE layer, for measuring
// expert-cache policies on real routing (`anymoe run --routing-trace FILE.npy`,
// replayed by `anymoe cache-sim`). The trace is an int32 .npy of shape
// [tokens, moe layers, experts per token], tokens in the order the model ran
// them (a prompt's tokens, then each generated one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/blocks/step_context.h"

namespace anymoe {

class RoutingTrace {
 public:
  RoutingTrace();
  // Install with Model::SetObserver(&trace.observer()); it must outlive that.
  const ForwardObserver& observer() const { return observer_; }
  int64_t tokens() const;
  Status Write(const std::string& path) const;

 private:
  ForwardObserver observer_;
  std::vector<int64_t> layers_;            // model layers in the order seen
  std::vector<std::vector<int32_t>> ids_;  // per MoE layer: [tokens, k]
  int64_t k_ = 0;
};

}  // namespace anymoe
