#include "runtime/routing_report.h"

#include <nlohmann/json.hpp>

namespace anymoe {

std::string RoutingStatsJson(const RoutingStats& stats, const std::string& model_name) {
  nlohmann::json out;
  out["model"] = model_name;
  out["experts_per_token"] = stats.experts_per_token;
  int64_t tokens = 0;
  nlohmann::json layers = nlohmann::json::array();
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
  return out.dump(1) + "\n";
}

}  // namespace anymoe
