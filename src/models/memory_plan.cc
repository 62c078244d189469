#include "models/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "formats/tensor_source.h"

namespace anymoe {
namespace {

class SizeOnlyBuffer final : public Buffer {
 public:
  explicit SizeOnlyBuffer(uint64_t size) : size_(size) {}
  void* base() override { return nullptr; }
  uint64_t size() const override { return size_; }

 private:
  uint64_t size_;
};

// Counts bytes by purpose; ops are never called while loading.
class PlanningBackend final : public Backend {
 public:
  explicit PlanningBackend(const Backend* target) : target_(target) {}
  const MemoryPlan& plan() const { return plan_; }

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override { return "planner"; }
  int num_threads() const override { return 1; }

  Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) override {
    if (what == "KV cache") {
      plan_.kv_cache += bytes;
    } else if (what == "activations") {
      plan_.activations += bytes;
    } else {
      plan_.weights += bytes;  // weights derived at load (absorbed MLA)
    }
    ++plan_.buffers;
    return std::unique_ptr<Buffer>(new SizeOnlyBuffer(bytes));
  }
  Status ReserveForContext(const ContextShape& shape) override {
    // Scratch is reserved, not added: every cache's call grows the same buffers.
    if (target_ != nullptr) {
      plan_.context_scratch = std::max(plan_.context_scratch, target_->ContextScratchBytes(shape));
    }
    return Status::Ok();
  }
  Expected<Tensor> PrepareWeight(const TensorInfo& info) override {
    plan_.buffers += info.scales ? 2 : 1;  // a device keeps FP8 scales in a buffer of their own
    return Count(info, plan_.weights);
  }
  // Host memory, never the device's (--cpu-moe).
  Expected<Tensor> PrepareCpuWeight(const TensorInfo& info) override {
    return Count(info, plan_.cpu_weights);
  }
  void ReadF32(const Tensor&, std::span<float> dst) override {
    std::fill(dst.begin(), dst.end(), 0.0f);  // derived weights: only their size matters
  }
  void WriteF32(std::span<const float>, const Tensor&) override {}
  void Synchronize() override {}

  // Never called during a load.
  void Embedding(const Tensor&, std::span<const int32_t>, const Tensor&) override { Fail(); }
  void RmsNorm(const Tensor&, const Tensor&, float, const Tensor&) override { Fail(); }
  void Matmul(const Tensor&, const Tensor&, const Tensor*, const Tensor&) override { Fail(); }
  void Rope(const Tensor&, std::span<const int32_t>, const RopeTable&) override { Fail(); }
  void Attention(const Tensor&, const Tensor&, const Tensor&, std::span<const int32_t>, int64_t,
                 float, const Tensor&) override {
    Fail();
  }
  void LatentAttention(const Tensor&, const Tensor&, int64_t, std::span<const int32_t>, int64_t,
                       float, const KeySelection*, const Tensor&) override {
    Fail();
  }
  void HeadMatmul(const Tensor&, int64_t, const Tensor&, const Tensor&, int64_t) override {
    Fail();
  }
  void CopyColumns(const Tensor&, int64_t, const Tensor&, int64_t, int64_t) override { Fail(); }
  void IndexerTopK(const Tensor&, const Tensor&, const Tensor&, std::span<const int32_t>, int64_t,
                   float, int64_t, std::span<int32_t>, std::span<int32_t>) override {
    Fail();
  }
  void LayerNorm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) override {
    Fail();
  }
  void Route(const Tensor&, const Tensor*, const RouterSpec&, std::span<int32_t>,
             std::span<float>) override {
    Fail();
  }
  void GroupedMatmul(const Tensor&, std::span<const Tensor>, std::span<const int32_t>,
                     const Tensor&) override {
    Fail();
  }
  void ScatterRows(const Tensor&, std::span<const int32_t>, const Tensor&) override { Fail(); }
  void GatherRows(const Tensor&, std::span<const int32_t>, const Tensor&) override { Fail(); }
  void ScatterAddRows(const Tensor&, std::span<const int32_t>, std::span<const float>,
                      const Tensor&) override {
    Fail();
  }
  void Zero(const Tensor&) override { Fail(); }
  void SwiGlu(const Tensor&, const Tensor&, const Tensor&) override { Fail(); }
  void Add(const Tensor&, const Tensor&, const Tensor&) override { Fail(); }
  void Copy(const Tensor&, const Tensor&) override { Fail(); }

 private:
  // The tensor PrepareWeight would make, its bytes added to `bytes`.
  static Tensor Count(const TensorInfo& info, uint64_t& bytes) {
    Tensor t;
    t.dtype = info.dtype;
    t.rank = int(info.shape.size());
    std::copy(info.shape.begin(), info.shape.end(), t.shape.begin());
    // Backends keep 1-D weights (norms, biases) as f32, the rest as in the file.
    if (t.rank == 1 && t.dtype != DType::kF32) {
      t.dtype = DType::kF32;
      bytes += uint64_t(t.elements()) * 4;
    } else {
      bytes += info.bytes;
    }
    if (info.scales) bytes += info.scales.GridBytes(info.rows(), info.cols());  // FP8 scales
    return t;
  }
  [[noreturn]] static void Fail() {
    CHECK(!"PlanningBackend runs no ops");
    std::abort();
  }
  const Backend* target_;
  MemoryPlan plan_;
};

}  // namespace

Expected<MemoryPlan> PlanMemory(const ModelFile& file, const LoadOptions& options) {
  PlanningBackend planner(options.plan_backend);
  LoadOptions planning = options;
  planning.planning = true;
  planning.progress = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelUnplanned(file, planner, planning));
  const int64_t tokens = KvCacheTokens(*model, options);
  // One sequence holds up to a context (a pool of one context when none is set).
  const int64_t context = std::min(options.context, model->config().max_position_embeddings);
  ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool,
                   model->NewPool(tokens, context > 0 ? context : tokens));
  MemoryPlan plan = planner.plan();
  plan.kv_tokens = tokens;
  plan.max_step_tokens = options.max_step_tokens;
  plan.expert_cache = model->expert_cache_bytes();
  plan.expert_cache_slots = model->expert_cache_slots();
  plan.streamed_weights = model->streamed_bytes();
  // Device slots are one buffer per part (NewDeviceExpertSlots), each aligned.
  if (plan.expert_cache > 0 && options.expert_cache.device_slots) plan.buffers += kExpertParts;
  return plan;
}

std::string DescribeMemoryPlan(const MemoryPlan& plan) {
  auto gib = [](uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f GiB", double(bytes) / double(uint64_t(1) << 30));
    return std::string(buf);
  };
  std::string s = gib(plan.total()) + " = weights " + gib(plan.weights) + " + KV cache " +
                  gib(plan.kv_cache) + " + activations " + gib(plan.activations);
  if (plan.context_scratch > 0) s += " + context scratch " + gib(plan.context_scratch);
  if (plan.expert_cache > 0) {
    s += " + expert cache " + gib(plan.expert_cache) + " (routed experts " +
         gib(plan.streamed_weights) + " stream from the file)";
  }
  return s;
}

}  // namespace anymoe
