// Whether a model's routed experts stream from disk through an expert cache,
// and how big that cache is: --expert-cache off | auto | SIZE | PERCENT%.
// `auto` (the default) keeps every weight resident when the model's memory
// plan fits the memory this process may use (system and cgroup), and else
// streams the experts with a cache of what is left after the resident part,
// saying so on stderr. `anymoe info` prints the same decision.
// On a device backend the cache is a hot-expert cache in device memory: with
// `auto`, when --mem-budget is below what every weight on the device needs,
// the budget left after the resident weights, KV cache, activations and
// staging holds as many experts as fit; the others are read from the file and
// uploaded into a slot when a step needs them (models/experts/).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/system_memory.h"
#include "models/model.h"

namespace anymoe {

struct ExpertStreamingOptions {
  std::string cache = "auto";  // off | auto | bytes with K/M/G/T | percent of routed bytes
  // LFRU: on a trained model's routing (SmolLM2, MoEfied) 3-30 points above
  // LRU at 5-50 % caches; LRU gets no hit at all below a token's working set.
  EvictionPolicy policy = EvictionPolicy::kLfru;
  bool prefetch = true;
  double prefetch_min_use = PrefetchGate::kDefaultMinUse;  // ExpertCacheOptions::prefetch_min_use
  float sticky = 0;  // --sticky-experts threshold (0: off)
  int io_threads = 2;
  // --cpu-moe / --n-cpu-moe N: on a device backend, the routed experts of the
  // first N layers (INT64_MAX: all) stay on the CPU (LoadOptions::cpu_moe_layers).
  int64_t cpu_moe_layers = 0;
  bool pack_panels = false;                      // set by the engine from the backend options
  ExpertReader::FaultHook fault_hook = nullptr;  // tests
};

struct ExpertStreamingPlan {
  bool stream = false;
  uint64_t cache_bytes = 0;
  MemoryPlan resident;  // all weights resident
  MemoryPlan streamed;  // experts streamed (with the cache)
  std::string note;     // set when `auto` chose to stream: why, for stderr
};

// "4G", "512M", "1.5G", "123456", "25%" (of `routed_bytes`); errors name the flag.
Expected<uint64_t> ParseExpertCacheSize(const std::string& spec, uint64_t routed_bytes);

// Where the plan is for: the CPU (device null), or a device backend and its
// --mem-budget (0: none set).
struct StreamingTarget {
  const Backend* device = nullptr;
  uint64_t mem_budget = 0;
};

// The plan for `file` under `load` (its expert_cache fields are filled from
// `options`), given `memory` (QuerySystemMemory()) and `target`.
Expected<ExpertStreamingPlan> PlanExpertStreaming(const ModelFile& file, LoadOptions& load,
                                                  const ExpertStreamingOptions& options,
                                                  const StreamingTarget& target,
                                                  const SystemMemory& memory);

}  // namespace anymoe
