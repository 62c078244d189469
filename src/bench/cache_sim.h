// Replays routing traces (runtime/routing_trace.h) through the expert cache's
// own bookkeeping (ExpertSlotTable: the policy code that runs) to measure
// eviction policies and cache sizes without reading a byte: per step and MoE
// layer, the experts the step's tokens chose are looked up in ascending
// order, pinned until the layer is done (as the runtime pins them), and
// missing ones claim a slot. Belady's optimal policy (evict the expert used
// furthest in the future) is the bound. `anymoe cache-sim` prints the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/experts/expert_slot_table.h"

namespace anymoe {

// One sequence's routing: ids [tokens, layers, k].
struct RoutingTraceData {
  std::string name;
  int64_t tokens = 0, layers = 0, k = 0;
  std::vector<int32_t> ids;
};
Expected<RoutingTraceData> ReadRoutingTrace(const std::string& path);

struct CacheSimOptions {
  int64_t experts = 0;   // per layer (0: the largest id in the traces + 1)
  int64_t parallel = 1;  // sequences decoded together: a step takes one token of each
  int64_t prefill = 0;   // the first `prefill` tokens of each sequence run as one step
};

struct CacheSimResult {
  std::string policy;  // lru, lfu, lfru, or opt (Belady)
  int64_t slots = 0;
  uint64_t lookups = 0, hits = 0;
  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0; }
};

// `policy` empty: Belady's optimum. Traces must agree on layers and k.
Expected<CacheSimResult> SimulateExpertCache(const std::vector<RoutingTraceData>& traces,
                                             const CacheSimOptions& options, int64_t slots,
                                             std::optional<EvictionPolicy> policy,
                                             double half_life = 0);

}  // namespace anymoe
