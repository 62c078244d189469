// `anymoe doctor -m FILE --backend X`: the operator check before a port. Loads
// the model on the backend, runs a short prefill and one decode step, and lists
// every op x dtype the model called with where it ran (native, or the CPU
// fallback), plus the device, the memory planned and reserved for it and, on
// the CPU, which matmul kernel each weight type runs.
#include <algorithm>
#include <cstdio>

#include "backends/fallback_backend.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/matmul_kernels.h"
#include "models/memory_plan.h"

namespace anymoe::cli {
namespace {

std::string Mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", double(bytes) / double(1 << 20));
  return buf;
}

// Two prompt tokens then one decoded token: every op a forward pass uses, on
// both the prefill (T > 1) and the decode (T = 1) shapes.
Status Exercise(Engine& engine) {
  Model& model = engine.model();
  ASSIGN_OR_RETURN(auto cache, model.NewCache(8));
  const int32_t vocab = int32_t(model.config().vocab_size);
  const int32_t prompt[2] = {1 % vocab, 2 % vocab}, next[1] = {3 % vocab};
  ASSIGN_OR_RETURN(Tensor logits, model.Forward(prompt, *cache, false));
  ASSIGN_OR_RETURN(logits, model.Forward(next, *cache, false));
  std::vector<float> out(size_t(logits.elements()));
  model.backend().ReadF32(logits, out);
  return Status::Ok();
}

// The op x dtype table: every pair the model called, where it runs (as the
// recorder saw it, or as `supports` says for a backend with no device here).
void PrintOps(const FallbackBackend& recorder, SupportsFn supports) {
  std::printf("\n%-16s %-7s %-9s %s\n", "op", "dtype", "runs", "calls");  // f8_e4m3: 7
  int native = 0, fallback = 0, cpu_weights = 0;
  for (const FallbackBackend::Usage& u : recorder.usage()) {
    const bool on_device = supports ? supports(u.op, u.dtype) : u.native;
    // "cpu-moe": on the CPU by request, its weights kept there (--cpu-moe).
    const char* runs = u.cpu_weights ? "cpu-moe" : on_device ? "native" : "fallback";
    std::printf("%-16s %-7s %-9s %llu\n", std::string(OpName(u.op)).c_str(),
                std::string(Name(u.dtype)).c_str(), runs, static_cast<unsigned long long>(u.calls));
    (u.cpu_weights ? cpu_weights : on_device ? native : fallback) += 1;
  }
  std::printf("\n%d op x dtype pairs: %d native, %d on the CPU fallback",
              native + fallback + cpu_weights, native, fallback);
  if (cpu_weights > 0) std::printf(", %d with their weights on the CPU (--cpu-moe)", cpu_weights);
  std::printf("\n");
}

// The operator check on a machine without the backend's device (a CUDA build
// on a host with no GPU): the ops the model calls, recorded on the CPU, each
// marked by the backend's own Supports table.
int RunDoctorWithoutDevice(EngineOptions options, SupportsFn supports, const Status& why) {
  const std::string backend = options.backend;
  options.backend = "cpu";
  options.exact_matmul = true;
  auto engine = LoadEngineOrReport(options);
  if (!engine) return 1;
  auto* recorder = dynamic_cast<FallbackBackend*>(&engine->backend());
  if (recorder == nullptr) return ReportError(Status::Error("doctor: backend is not recorded"));
  if (Status st = Exercise(*engine); !st.ok()) return ReportError(st);
  const ModelConfig& c = engine->model().config();
  std::printf("model:    %s (%s, %lld layers)\n", options.model_path.c_str(), c.arch.c_str(),
              static_cast<long long>(c.num_layers));
  std::printf("backend:  %s (plugin; ops recorded on the CPU, support from its table)\n",
              backend.c_str());
  std::printf("device:   none: %s\n", why.message().c_str());
  PrintOps(*recorder, supports);
  return 0;
}

int RunDoctor(EngineOptions options) {
  options.record_ops = true;
  options.progress = false;
  if (SupportsFn supports = DeviceSupportsTable(options.backend)) {
    BackendOptions probe_options;
    probe_options.device = options.device;
    if (auto probe = CreateBackend(options.backend, probe_options); !probe.ok()) {
      return RunDoctorWithoutDevice(options, supports, probe.status());
    }
  }
  auto engine = LoadEngineOrReport(options);
  if (!engine) return 1;
  auto* recorder = dynamic_cast<FallbackBackend*>(&engine->backend());
  if (recorder == nullptr) return ReportError(Status::Error("doctor: backend is not recorded"));
  if (Status st = Exercise(*engine); !st.ok()) return ReportError(st);

  const DeviceInfo dev = engine->backend().device();
  const ModelConfig& c = engine->model().config();
  std::printf("model:    %s (%s, %lld layers)\n", options.model_path.c_str(), c.arch.c_str(),
              static_cast<long long>(c.num_layers));
  std::printf("backend:  %s\n", engine->backend().name().c_str());
  std::printf("device:   %s\n", dev.name.c_str());
  if (dev.memory_bytes > 0) {
    std::printf("memory:   %s on the device, %s reserved (%s of it staging)\n",
                Mib(dev.memory_bytes).c_str(), Mib(dev.reserved_bytes).c_str(),
                Mib(dev.scratch_bytes).c_str());
  }
  LoadOptions load;
  load.max_step_tokens = options.max_step_tokens;
  load.context = options.context;
  load.kv_type = engine->kv_type();
  load.mla_form = options.mla_form;
  load.plan_backend = &engine->backend();
  if (engine->backend().kind() != BackendKind::kCpu) {
    load.cpu_moe_layers = options.experts.cpu_moe_layers;
  }
  const ExpertStreamingPlan& streaming = engine->expert_streaming();
  if (streaming.stream) {
    const MemoryPlan& m = streaming.streamed;
    std::printf("plan:     resident weights %s, KV cache %s (%lld tokens), activations %s\n",
                Mib(m.weights).c_str(), Mib(m.kv_cache).c_str(),
                static_cast<long long>(m.kv_tokens), Mib(m.activations).c_str());
    std::printf("experts:  %s cache of %lld slots (%s), routed experts %s stay in the file%s\n",
                engine->backend().kind() == BackendKind::kCpu ? "RAM" : "device",
                static_cast<long long>(m.expert_cache_slots), Mib(m.expert_cache).c_str(),
                Mib(m.streamed_weights).c_str(),
                m.cpu_weights > 0 ? (", " + Mib(m.cpu_weights) + " on the CPU (--cpu-moe)").c_str()
                                  : "");
  } else if (auto plan = PlanMemory(engine->file(), load); plan.ok()) {
    std::printf("plan:     weights %s, KV cache %s (%lld tokens), activations %s\n",
                Mib(plan->weights).c_str(), Mib(plan->kv_cache).c_str(),
                static_cast<long long>(plan->kv_tokens), Mib(plan->activations).c_str());
    if (plan->cpu_weights > 0) {
      const int64_t layers = std::min(load.cpu_moe_layers, c.num_layers);
      std::printf("placement: routed experts of layers 0-%lld on the CPU (%s in RAM), the rest "
                  "on the device\n",
                  static_cast<long long>(layers - 1), Mib(plan->cpu_weights).c_str());
    }
  }
  // The CPU's matmul kernels, where matmuls run on it.
  if (engine->backend().kind() == BackendKind::kCpu || load.cpu_moe_layers > 0) {
    std::printf("%s", CpuMatmulKernelLine(engine->file().tensors()).c_str());
  }
  PrintOps(*recorder, nullptr);
  return 0;
}

}  // namespace

CommandFn RegisterDoctor(CLI::App& cmd) {
  auto options = std::make_shared<EngineOptions>();
  options->context = 256;
  AddEngineOptions(cmd, *options);
  return [options] { return RunDoctor(*options); };
}

}  // namespace anymoe::cli
