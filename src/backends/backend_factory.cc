// Creates a backend by name from the registry (backend_registry.h): the CPU
// backend, or a device backend, loaded from its plugin on first use and
// wrapped in FallbackBackend.
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backends/backend.h"
#include "backends/backend_plugin.h"
#include "backends/backend_registry.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/fallback_backend.h"

namespace anymoe {

namespace {

// The CPU backend, its threads and memory placed as options.numa says: the
// memory policy is set here, on the thread that creates the backend (and so
// inherited by the pool's workers), before any weight is touched.
Expected<std::unique_ptr<Backend>> NewCpu(const BackendOptions& options) {
  int threads = options.num_threads;
  NumaPlacement placement;
  if (options.numa != NumaMode::kNone) {
    const CpuTopology topology = ReadCpuTopology();
    placement = PlanNumaPlacement(topology, options.numa, threads, CurrentNumaNode(topology));
    RETURN_IF_ERROR(ApplyMemoryPolicy(placement));
    threads = int(placement.thread_cpus.size());
  }
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  auto cpu = std::make_unique<CpuBackend>(threads, options.exact_matmul, options.repack_weights,
                                          options.copy_weights, options.numa, std::move(placement));
  cpu->set_int16_indexer(options.int16_indexer);
  cpu->set_populate_weights(options.populate_weights);
  return std::unique_ptr<Backend>(std::move(cpu));
}

// A backend this build knows. A plugin's entry has no functions until the
// plugin is loaded; a failed load is remembered and answered again.
struct Known {
  BackendEntry entry;
  bool plugin = false;
  bool tried = false;
  Status load_error;
};

std::mutex registry_mutex;

// "cpu", then the plugins the build made, in the build's order.
std::vector<Known>& Registry() {
  static std::vector<Known> known = [] {
    std::vector<Known> k(1);
    k[0].entry = BackendEntry{.name = "cpu", .create = &NewCpu, .device = false};
    for (const std::string& name : BuiltPluginBackends()) {
      k.emplace_back();
      k.back().entry.name = name;
      k.back().plugin = true;
    }
    return k;
  }();
  return known;
}

// Backend `name`'s entry, its plugin loaded if it is one.
Expected<BackendEntry> Resolve(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (Known& k : Registry()) {
    if (k.entry.name != name) continue;
    if (k.plugin && !k.tried) {
      k.tried = true;
      Expected<BackendEntry> loaded = LoadBackendPlugin(name, BackendPluginAbi());
      if (loaded.ok()) {
        k.entry = std::move(loaded).value();
      } else {
        k.load_error = loaded.status();
      }
    }
    if (!k.load_error.ok()) return k.load_error;
    return k.entry;
  }
  std::string known;
  for (const Known& k : Registry()) known += (known.empty() ? "" : ", ") + k.entry.name;
  return Status::Error("unknown backend '" + name + "' (this build has: " + known + ")",
                       ErrorKind::kInvalidArgument, "unknown_backend");
}

// Op names from options.disabled_ops, else from $ANYMOE_DISABLE_OPS.
Expected<std::vector<Op>> DisabledOps(const BackendOptions& options) {
  std::string list = options.disabled_ops;
  if (list.empty()) {
    if (const char* env = std::getenv("ANYMOE_DISABLE_OPS")) list = env;
  }
  std::vector<Op> ops;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(start, end - start);
    if (!name.empty()) {
      const std::optional<Op> op = OpFromName(name);
      if (!op) return Status::Error("unknown op '" + name + "' in ANYMOE_DISABLE_OPS");
      ops.push_back(*op);
    }
    start = end + 1;
  }
  return ops;
}

// A backend with the CPU behind it for the ops it cannot run (a device), or
// only recording what the model calls (the CPU).
Expected<std::unique_ptr<Backend>> WithFallback(std::unique_ptr<Backend> backend,
                                                const BackendOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Op> disabled, DisabledOps(options));
  // Device kernels keep activations in f32, so the CPU standing in for them must too.
  BackendOptions cpu = options;
  cpu.exact_matmul = backend->kind() != BackendKind::kCpu || options.exact_matmul;
  cpu.populate_weights = false;  // its weights are read only when an op falls back
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> fallback, NewCpu(cpu));
  return std::unique_ptr<Backend>(new FallbackBackend(std::move(backend), std::move(fallback),
                                                      std::move(disabled), options.time_ops));
}

}  // namespace

std::vector<std::string> AvailableBackends() {
  std::vector<std::string> names;
  for (const Known& k : Registry()) names.push_back(k.entry.name);
  return names;
}

SupportsFn DeviceSupportsTable(const std::string& name) {
  if (name == "cpu") return nullptr;
  Expected<BackendEntry> e = Resolve(name);
  return e.ok() ? e->supports : nullptr;
}

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& name,
                                                 const BackendOptions& options) {
  ASSIGN_OR_RETURN(const BackendEntry e, Resolve(name));
  ASSIGN_OR_RETURN(auto backend, e.create(options));
  // The CPU runs every op itself; wrapped only to record what a model calls.
  if (e.device || options.record_ops || options.time_ops) {
    return WithFallback(std::move(backend), options);
  }
  return backend;
}

}  // namespace anymoe
