// Routing statistics as JSON: per MoE layer, how many tokens each expert got.
// `anymoe run --routing-stats FILE.json` writes it; tools read it to decide
// expert placement and cache sizes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model.h"

namespace anymoe {

// {"model", "experts_per_token", "tokens", "layers": [{"layer", "counts": [...],
// "total", "active_experts"}]}; `tokens` is each layer's total / experts_per_token.
// With streamed experts also "expert_cache" (ExpertCacheJson).
// The expert cache's counters and the figures derived from them (hit rate,
// bytes and stall per token, prediction precision and recall).
nlohmann::ordered_json ExpertCacheJson(const ExpertCacheStats& stats);

std::string RoutingStatsJson(const RoutingStats& stats, const std::string& model_name);

}  // namespace anymoe
