// `anymoe cache-sim`: replays routing traces (`anymoe run --routing-trace`)
// through the expert cache's bookkeeping for each eviction policy and cache
// size, and prints the hit rates next to Belady's optimum. How the default
// policy was chosen; see src/bench/cache_sim.h.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cache_sim.h"
#include "cli/commands.h"
#include "cli/common_options.h"

namespace anymoe::cli {
namespace {

struct CacheSimFlags {
  std::vector<std::string> traces;
  std::vector<double> sizes{10, 25, 50};  // percent of all experts
  std::vector<std::string> policies{"lru", "lfu", "lfru", "opt"};
  std::vector<double> half_lives{ExpertSlotTable::kDefaultHalfLifeSlots};  // LFRU, x slots
  CacheSimOptions sim;
};

int CacheSim(const CacheSimFlags& f) {
  std::vector<RoutingTraceData> traces;
  int64_t tokens = 0;
  for (const std::string& path : f.traces) {
    auto t = ReadRoutingTrace(path);
    if (!t.ok()) return ReportError(t.status());
    tokens += t->tokens;
    traces.push_back(std::move(t).value());
  }
  int64_t experts = f.sim.experts;
  for (const auto& t : traces) {
    for (int32_t id : t.ids) experts = std::max<int64_t>(experts, id + 1);
  }
  const int64_t all = experts * traces[0].layers;
  std::printf(
      "%zu trace(s), %lld tokens, %lld MoE layers x %lld experts, top-%lld; "
      "%lld sequence(s) per step, prefill chunk %lld\n\n",
      traces.size(), (long long)tokens, (long long)traces[0].layers, (long long)experts,
      (long long)traces[0].k, (long long)f.sim.parallel, (long long)f.sim.prefill);
  std::printf("| cache | slots | policy | hit rate |\n| ----: | ----: | ------ | -------: |\n");
  for (double pct : f.sizes) {
    const int64_t slots = std::max<int64_t>(1, int64_t(double(all) * pct / 100 + 0.5));
    for (const std::string& name : f.policies) {
      const auto policy = ParseEvictionPolicy(name);
      if (!policy && name != "opt") {
        return ReportError(Status::Error("--policy: unknown policy '" + name + "'"));
      }
      const bool lfru = policy == EvictionPolicy::kLfru;
      for (double h : lfru ? f.half_lives : std::vector<double>{1}) {
        auto r =
            SimulateExpertCache(traces, CacheSimOptions{experts, f.sim.parallel, f.sim.prefill},
                                slots, policy, h * double(slots));
        if (!r.ok()) return ReportError(r.status());
        std::string label = r->policy;
        if (lfru && f.half_lives.size() > 1) label += " h=" + std::to_string(h).substr(0, 4);
        std::printf("| %4.0f %% | %5lld | %-10s | %6.2f %% |\n", pct, (long long)slots,
                    label.c_str(), 100 * r->hit_rate());
      }
    }
  }
  return 0;
}

}  // namespace

CommandFn RegisterCacheSim(CLI::App& cmd) {
  auto f = std::make_shared<CacheSimFlags>();
  cmd.add_option("-t,--trace", f->traces, "routing trace .npy (repeatable: one per sequence)")
      ->required();
  cmd.add_option("--cache", f->sizes, "cache sizes in percent of all routed experts")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--policy", f->policies, "policies: lru, lfu, lfru, opt (Belady's bound)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--half-life", f->half_lives,
                 "LFRU half-lives, in multiples of the slot count (uses of any expert)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--experts", f->sim.experts, "experts per layer (default: from the traces)");
  cmd.add_option("--parallel", f->sim.parallel, "sequences decoded together per step")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd.add_option("--prefill", f->sim.prefill,
                 "the first N tokens of each trace run as one prefill step");
  return [f] { return CacheSim(*f); };
}

}  // namespace anymoe::cli
