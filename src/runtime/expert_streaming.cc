#include "runtime/expert_streaming.h"

#include <cmath>
#include <cstdio>

#include "models/config_loader.h"
#include "models/memory_plan.h"

namespace anymoe {
namespace {

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

// Memory `auto` leaves unplanned (allocator slack, the OS's own page cache).
constexpr double kHeadroom = 0.9;

}  // namespace

Expected<uint64_t> ParseExpertCacheSize(const std::string& spec, uint64_t routed_bytes) {
  const auto bad = [&] {
    return Status::Error("--expert-cache: '" + spec +
                         "' is not off, auto, a size (bytes, or with K/M/G/T) or a percentage "
                         "of the routed-expert bytes (e.g. 25%)");
  };
  if (spec.empty()) return bad();
  size_t used = 0;
  double v;
  try {
    v = std::stod(spec, &used);
  } catch (...) {
    return bad();
  }
  if (!std::isfinite(v) || v <= 0) return bad();
  const std::string unit = spec.substr(used);
  double scale = 1;
  if (unit == "%") {
    if (v > 100) return bad();
    return uint64_t(double(routed_bytes) * v / 100);
  }
  if (unit == "K" || unit == "k" || unit == "KiB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return bad();
  if (v * scale >= 0x1p62) return bad();
  return uint64_t(v * scale);
}

Expected<ExpertStreamingPlan> PlanExpertStreaming(const ModelFile& file, LoadOptions& load,
                                                  const ExpertStreamingOptions& options,
                                                  bool cpu_backend, const SystemMemory& memory) {
  ExpertStreamingPlan plan;
  load.sticky_experts = options.sticky;
  ExpertCacheOptions& c = load.expert_cache;
  c.enabled = false;
  if (options.cache == "off") return plan;
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(file));
  if (!config.is_moe()) {
    if (options.cache == "auto") return plan;
    return Status::Error("--expert-cache: " + file.path + " has no routed experts to stream");
  }
  c.policy = options.policy;
  c.prefetch = options.prefetch;
  c.io_threads = options.io_threads;
  c.pack_panels = options.pack_panels;
  c.fault_hook = options.fault_hook;
  ASSIGN_OR_RETURN(plan.resident, PlanMemory(file, load));
  // Planned with one slot: the resident part and the routed bytes.
  c.enabled = true;
  c.slots = 1;
  ASSIGN_OR_RETURN(plan.streamed, PlanMemory(file, load));
  c.slots = 0;
  const uint64_t routed = plan.streamed.streamed_weights;
  const uint64_t resident_part = plan.streamed.total() - plan.streamed.expert_cache;
  if (options.cache == "auto") {
    const uint64_t usable = uint64_t(double(memory.available) * kHeadroom);
    if (memory.available == 0 || plan.resident.total() <= usable || !cpu_backend) {
      c.enabled = false;
      return plan;
    }
    if (resident_part + plan.streamed.expert_cache > usable) {
      return Status::Error(file.path + " needs " + Gib(plan.resident.total()) +
                           " with every weight resident and " +
                           Gib(resident_part + plan.streamed.expert_cache) +
                           " even with its routed experts streamed from disk, but only " +
                           Gib(memory.available) + " is available");
    }
    c.bytes = usable - resident_part;
    plan.note = file.path + " needs " + Gib(plan.resident.total()) + " but " +
                Gib(memory.available) + " is available" +
                (memory.cgroup_limit ? " (memory cgroup limit " + Gib(*memory.cgroup_limit) + ")"
                                     : std::string()) +
                ": streaming its routed experts from disk through a " + Gib(c.bytes) +
                " expert cache (--expert-cache SIZE sets it, off keeps every weight resident)";
  } else {
    if (!cpu_backend) {
      return Status::Error(
          "--expert-cache: streaming experts runs on the cpu backend only "
          "(device backends: a later release)");
    }
    ASSIGN_OR_RETURN(c.bytes, ParseExpertCacheSize(options.cache, routed));
    // A percentage is a share of the experts (each slot also takes alignment
    // slack for direct reads, which the byte count would otherwise eat).
    if (options.cache.ends_with('%') && routed > 0) c.fraction = double(c.bytes) / double(routed);
  }
  ASSIGN_OR_RETURN(plan.streamed, PlanMemory(file, load));
  plan.stream = true;
  plan.cache_bytes = plan.streamed.expert_cache;
  return plan;
}

}  // namespace anymoe
