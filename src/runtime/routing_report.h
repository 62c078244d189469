// Routing statistics as JSON: per MoE layer, how many tokens each expert got.
// `anymoe run --routing-stats FILE.json` writes it; tools read it to decide
// expert placement and cache sizes.
#pragma once

#include <string>

#include "models/model.h"

namespace anymoe {

// {"model", "experts_per_token", "tokens", "layers": [{"layer", "counts": [...],
// "total", "active_experts"}]}; `tokens` is each layer's total / experts_per_token.
std::string RoutingStatsJson(const RoutingStats& stats, const std::string& model_name);

}  // namespace anymoe
