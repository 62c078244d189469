// Creates a backend by name; the one place that knows the list of backends.
#include <cstdlib>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/fallback_backend.h"
#ifdef ANYMOE_HAVE_OPENCL
#include "backends/opencl/opencl_backend.h"
#endif
#ifdef ANYMOE_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

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
  return std::unique_ptr<Backend>(new CpuBackend(threads, options.exact_matmul,
                                                 options.repack_weights, options.numa,
                                                 std::move(placement)));
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

// A device backend with the CPU behind it for the ops it cannot run.
Expected<std::unique_ptr<Backend>> WithFallback(std::unique_ptr<Backend> device,
                                                const BackendOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Op> disabled, DisabledOps(options));
  // Device kernels keep activations in f32, so the CPU standing in for them must too.
  BackendOptions cpu = options;
  cpu.exact_matmul = device->kind() != BackendKind::kCpu || options.exact_matmul;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> fallback, NewCpu(cpu));
  return std::unique_ptr<Backend>(new FallbackBackend(std::move(device), std::move(fallback),
                                                      std::move(disabled), options.time_ops));
}

}  // namespace

std::vector<std::string> AvailableBackends() {
  std::vector<std::string> names = {"cpu"};
#ifdef ANYMOE_HAVE_OPENCL
  names.push_back("opencl");
#endif
#ifdef ANYMOE_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

SupportsFn DeviceSupportsTable(const std::string& name) {
#ifdef ANYMOE_HAVE_CUDA
  if (name == "cuda") return &cuda::CudaBackend::SupportsOp;
#endif
  return nullptr;
}

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& name,
                                                 const BackendOptions& options) {
  if (name == "cpu") {
    // The CPU runs every op itself; wrapped only to record what a model calls.
    ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, NewCpu(options));
    if (options.record_ops || options.time_ops) return WithFallback(std::move(cpu), options);
    return cpu;
  }
#ifdef ANYMOE_HAVE_OPENCL
  if (name == "opencl") {
    ASSIGN_OR_RETURN(auto device, opencl::OpenClBackend::Create(options));
    return WithFallback(std::move(device), options);
  }
#endif
#ifdef ANYMOE_HAVE_CUDA
  if (name == "cuda") {
    ASSIGN_OR_RETURN(auto device, cuda::CudaBackend::Create(options));
    return WithFallback(std::move(device), options);
  }
#endif
  std::string known;
  for (const std::string& b : AvailableBackends()) known += (known.empty() ? "" : ", ") + b;
  return Status::Error("unknown backend '" + name + "' (this build has: " + known + ")");
}

}  // namespace anymoe
