#include "runtime/routing_report.h"

#include <nlohmann/json.hpp>

namespace anymoe {

nlohmann::ordered_json ExpertCacheJson(const ExpertCacheStats& c) {
  return {{"policy", c.policy},
          {"prefetch", c.prefetch},
          {"device", c.device},
          {"slots", c.slots},
          {"capacity_bytes", c.capacity_bytes},
          {"routed_bytes", c.routed_bytes},
          {"tokens", c.tokens},
          {"lookups", c.lookups},
          {"hits", c.hits},
          {"misses", c.misses},
          {"hit_rate", c.hit_rate()},
          {"evictions", c.evictions},
          {"loads", c.loads},
          {"bytes_read", c.bytes_read},
          {"bytes_per_token", c.bytes_per_token()},
          {"stall_ns", c.stall_ns},
          {"stall_ms_per_token", c.stall_ms_per_token()},
          {"prefetches", c.prefetches},
          {"prefetch_used", c.prefetch_used},
          {"prefetch_skipped", c.prefetch_skipped},
          {"predicted", c.predicted},
          {"predicted_used", c.predicted_used},
          {"prediction_precision", c.prediction_precision()},
          {"prediction_recall", c.prediction_recall()},
          {"sticky_routings", c.sticky_tokens},
          {"warm_loads", c.warm_loads},
          {"pinned", c.pinned},
          {"read_errors", c.read_errors}};
}

std::string RoutingStatsJson(const RoutingStats& stats, const std::string& model_name) {
  nlohmann::ordered_json out;
  out["model"] = model_name;
  out["experts_per_token"] = stats.experts_per_token;
  int64_t tokens = 0;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t i = 0; i < stats.layers.size(); ++i) {
    int64_t total = 0, active = 0;
    for (int64_t c : stats.counts[i]) {
      total += c;
      active += c > 0;
    }
    tokens = stats.experts_per_token > 0 ? total / stats.experts_per_token : 0;
    layers.push_back({{"layer", stats.layers[i]},
                      {"counts", stats.counts[i]},
                      {"total", total},
                      {"active_experts", active}});
  }
  out["tokens"] = tokens;
  out["layers"] = std::move(layers);
  if (stats.cache.enabled) out["expert_cache"] = ExpertCacheJson(stats.cache);
  return out.dump(1) + "\n";
}

}  // namespace anymoe
