#include "bench/cache_sim.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "core/npy.h"

namespace anymoe {
namespace {

// The (layer, expert) sets of each step, in execution order.
struct Steps {
  std::vector<std::vector<std::vector<int32_t>>> sets;  // [step][layer] -> experts, ascending
};

Steps BuildSteps(const std::vector<RoutingTraceData>& traces, const CacheSimOptions& o) {
  Steps s;
  const int64_t layers = traces[0].layers, k = traces[0].k;
  // Sequences run in groups of `parallel`; each group first prefills (chunk),
  // then decodes one token of each live sequence per step.
  for (size_t g = 0; g < traces.size(); g += size_t(o.parallel)) {
    const size_t end = std::min(traces.size(), g + size_t(o.parallel));
    std::vector<int64_t> next(end - g, 0);
    auto add_rows = [&](std::vector<std::vector<int32_t>>& step, const RoutingTraceData& t,
                        int64_t row) {
      for (int64_t l = 0; l < layers; ++l) {
        for (int64_t j = 0; j < k; ++j)
          step[size_t(l)].push_back(t.ids[size_t((row * layers + l) * k + j)]);
      }
    };
    for (size_t q = g; q < end; ++q) {
      const int64_t n = std::min(o.prefill, traces[q].tokens);
      if (n == 0) continue;
      std::vector<std::vector<int32_t>> step(static_cast<size_t>(layers), std::vector<int32_t>());
      for (int64_t r = 0; r < n; ++r) add_rows(step, traces[q], r);
      s.sets.push_back(std::move(step));
      next[q - g] = n;
    }
    for (;;) {
      std::vector<std::vector<int32_t>> step(static_cast<size_t>(layers), std::vector<int32_t>());
      bool any = false;
      for (size_t q = g; q < end; ++q) {
        if (next[q - g] >= traces[q].tokens) continue;
        add_rows(step, traces[q], next[q - g]++);
        any = true;
      }
      if (!any) break;
      s.sets.push_back(std::move(step));
    }
  }
  for (auto& step : s.sets) {
    for (auto& set : step) {
      std::sort(set.begin(), set.end());
      set.erase(std::unique(set.begin(), set.end()), set.end());
    }
  }
  return s;
}

}  // namespace

Expected<RoutingTraceData> ReadRoutingTrace(const std::string& path) {
  ASSIGN_OR_RETURN(NpyArray a, ReadNpy(path));
  if (a.dtype != NpyDType::kI32 || a.shape.size() != 3) {
    return Status::Error(path + ": a routing trace is an int32 array [tokens, layers, k]");
  }
  RoutingTraceData t;
  t.name = path;
  t.tokens = a.shape[0];
  t.layers = a.shape[1];
  t.k = a.shape[2];
  ASSIGN_OR_RETURN(t.ids, a.I32());
  for (int32_t id : t.ids) {
    if (id < 0) return Status::Error(path + ": negative expert id " + std::to_string(id));
  }
  return t;
}

Expected<CacheSimResult> SimulateExpertCache(const std::vector<RoutingTraceData>& traces,
                                             const CacheSimOptions& options, int64_t slots,
                                             std::optional<EvictionPolicy> policy,
                                             double half_life) {
  if (traces.empty()) return Status::Error("cache-sim: no traces");
  for (const auto& t : traces) {
    if (t.layers != traces[0].layers || t.k != traces[0].k) {
      return Status::Error("cache-sim: " + t.name + " has another layer count or k than " +
                           traces[0].name);
    }
  }
  int64_t experts = options.experts;
  if (experts == 0) {
    for (const auto& t : traces) {
      for (int32_t id : t.ids) experts = std::max<int64_t>(experts, id + 1);
    }
  }
  const int64_t layers = traces[0].layers, ids = layers * experts;
  CacheSimOptions o = options;
  o.parallel = std::max<int64_t>(1, o.parallel);
  const Steps s = BuildSteps(traces, o);

  CacheSimResult r;
  r.policy = policy ? std::string(EvictionPolicyName(*policy)) : "opt";
  r.slots = slots;
  // Belady: every use of each id in order, to find the next use after now.
  std::vector<std::vector<uint64_t>> uses(size_t(policy ? 0 : ids));
  if (!policy) {
    uint64_t time = 0;
    for (const auto& step : s.sets) {
      for (int64_t l = 0; l < layers; ++l) {
        for (int32_t e : step[size_t(l)]) uses[size_t(l * experts + e)].push_back(time++);
      }
    }
  }
  std::vector<size_t> cursor(uses.size(), 0);
  auto next_use = [&](int64_t id) {
    const auto& u = uses[size_t(id)];
    return cursor[size_t(id)] < u.size() ? u[cursor[size_t(id)]]
                                         : std::numeric_limits<uint64_t>::max();
  };
  ExpertSlotTable table(slots, ids, policy.value_or(EvictionPolicy::kLru), half_life);
  std::vector<int64_t> cached;  // opt: the cached ids
  std::vector<int32_t> pinned;
  for (const auto& step : s.sets) {
    for (int64_t l = 0; l < layers; ++l) {
      pinned.clear();
      for (int32_t e : step[size_t(l)]) {
        const int64_t id = l * experts + e;
        ++r.lookups;
        if (!policy) {  // Belady over the table's contents, pins respected
          ++cursor[size_t(id)];
          if (table.SlotOf(id) >= 0) {
            ++r.hits;
            table.Pin(table.SlotOf(id));
            pinned.push_back(table.SlotOf(id));
            continue;
          }
          int32_t victim = -1;
          if (table.pinned_slots() < slots) {
            uint64_t furthest = 0;
            for (int32_t sl = 0; sl < int32_t(slots); ++sl) {
              const int64_t held = table.IdOf(sl);
              if (held < 0) {
                victim = sl;
                break;
              }
              if (table.pins(sl) > 0) continue;
              const uint64_t nu = next_use(held);
              if (victim < 0 || nu > furthest) victim = sl, furthest = nu;
            }
            if (table.IdOf(victim) >= 0) table.Free(victim);
          }
          if (victim >= 0) {
            const int32_t sl = table.Claim(id);
            table.Pin(sl);
            pinned.push_back(sl);
          }
          continue;
        }
        int32_t sl = table.SlotOf(id);
        if (sl >= 0) {
          ++r.hits;
        } else {
          sl = table.Claim(id);
          if (sl < 0) continue;  // every slot pinned: streamed through, not kept
        }
        table.Pin(sl);
        table.Touch(sl);
        pinned.push_back(sl);
      }
      for (int32_t sl : pinned) table.Unpin(sl);
    }
  }
  return r;
}

}  // namespace anymoe
