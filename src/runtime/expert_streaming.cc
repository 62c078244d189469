#include "runtime/expert_streaming.h"

#include <cmath>
#include <cstdio>

#include "models/config_loader.h"
#include "models/memory_plan.h"

namespace anymoe {
namespace {

std::string Gib(uint64_t bytes) {
  char buf[32];
  if (bytes < (uint64_t(1) << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / double(1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  }
  return buf;
}

// "N bytes (M.m MiB)", as the device backends write budgets.
std::string Bytes(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                double(bytes) / double(1 << 20));
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
                                                  const StreamingTarget& target,
                                                  const SystemMemory& memory) {
  ExpertStreamingPlan plan;
  load.sticky_experts = options.sticky;
  ExpertCacheOptions& c = load.expert_cache;
  c.enabled = false;
  // Nothing streams: the plan is every weight resident (what info and serve print).
  auto resident_only = [&]() -> Expected<ExpertStreamingPlan> {
    ASSIGN_OR_RETURN(plan.resident, PlanMemory(file, load));
    return plan;
  };
  if (options.cache == "off") return resident_only();
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(file));
  if (!config.is_moe()) {
    if (options.cache == "auto") return resident_only();
    return Status::Error("--expert-cache: " + file.path + " has no routed experts to stream");
  }
  const Backend* device = target.device;
  c.policy = options.policy;
  c.prefetch = options.prefetch;
  c.prefetch_min_use = options.prefetch_min_use;
  c.io_threads = options.io_threads;
  c.pack_panels = device == nullptr && options.pack_panels;
  c.device_slots = device != nullptr;
  c.fault_hook = options.fault_hook;
  ASSIGN_OR_RETURN(plan.resident, PlanMemory(file, load));
  // Planned with one slot: the resident part and the routed bytes.
  c.enabled = true;
  c.slots = 1;
  ASSIGN_OR_RETURN(plan.streamed, PlanMemory(file, load));
  c.slots = 0;
  const uint64_t routed = plan.streamed.streamed_weights;
  if (options.cache == "auto" && device != nullptr) {
    // The device's budget: everything on the device when it fits (or when no
    // budget is set), else a hot-expert cache in what the rest leaves.
    const uint64_t all = device->DeviceBytesFor(plan.resident);
    if (target.mem_budget == 0 || all <= target.mem_budget) {
      c.enabled = false;
      return plan;
    }
    const uint64_t one = device->DeviceBytesFor(plan.streamed);
    const uint64_t fixed = one - plan.streamed.expert_cache;
    if (one > target.mem_budget) {
      return Status::Error(device->name() + ": the model needs " + Bytes(all) +
                           " of device memory with every weight on the device and " +
                           Bytes(one) +
                           " even with a device expert cache of one expert, but --mem-budget "
                           "allows " +
                           Bytes(target.mem_budget) + " (" + file.path + ")");
    }
    c.bytes = target.mem_budget - fixed;
    ASSIGN_OR_RETURN(plan.streamed, PlanMemory(file, load));
    plan.stream = true;
    plan.cache_bytes = plan.streamed.expert_cache;
    plan.note = file.path + " needs " + Gib(all) + " of " + device->name() +
                " memory with every weight resident but --mem-budget allows " +
                Gib(target.mem_budget) + ": routed experts stay in the file, " +
                std::to_string(plan.streamed.expert_cache_slots) + " of them (" +
                Gib(plan.cache_bytes) + ") at a time in a device expert cache";
    return plan;
  }
  const uint64_t resident_part = plan.streamed.total() - plan.streamed.expert_cache;
  if (options.cache == "auto") {
    const uint64_t usable = uint64_t(double(memory.available) * kHeadroom);
    if (memory.available == 0 || plan.resident.total() <= usable) {
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
    // A size on a device backend is device memory, reserved within --mem-budget.
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
