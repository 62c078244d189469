// Wraps a device backend so that every op runs somewhere: natively when the
// device Supports(op, dtype) and the op is not disabled, else on a CpuBackend
// with the copies it needs (device activations read into host mirrors, CPU op,
// results written back; weights are read in place from the file's mmap). Each
// fallback is reported once on stderr, and every op x dtype called is recorded
// for `anymoe doctor`. A new device backend gets all of this by implementing
// Backend and Supports; it never needs its own fallback code. Weights prepared
// with PrepareCpuWeight (the routed experts of --cpu-moe) never reach the
// device: the ops that read them run on the CPU, by request, not reported.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

class FallbackBackend final : public Backend {
 public:
  // `disabled`: ops forced onto the CPU even where the device supports them.
  // `time_ops`: time every op to its completion (the device is synchronised
  // after each, so a timed run is slower than an untimed one).
  FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> cpu,
                  std::vector<Op> disabled, bool time_ops = false);

  Backend& device_backend() { return *device_; }
  // Whether (op, dtype) runs on the device.
  bool Native(Op op, DType dtype) const;

  struct Usage {
    Op op;
    DType dtype;
    bool native;
    uint64_t calls;
    bool cpu_weights = false;  // on the CPU because its weights are (PrepareCpuWeight)
  };
  // Every op x dtype called since load, in op order.
  std::vector<Usage> usage() const;

  // Which parts a timed call fused around its op (FusedMatmul, StepAttention).
  enum Fusion : uint8_t {
    kPlain = 0,
    kNormBefore = 1,   // RmsNorm + the op
    kSwiGluAfter = 2,  // the op + SwiGlu
    kAddAfter = 4,     // the op + Add
    kRopeAndCacheWrite = 8,  // Rope + ScatterRows + the op
  };
  static constexpr int kFusions = 16;
  // "RmsNorm+Matmul+SwiGlu", "Rope+ScatterRows+Attention", "Matmul".
  static std::string Label(Op op, int fusion);

  struct OpTime {
    Op op;
    int fusion;  // Fusion bits
    DType dtype;
    uint64_t calls;
    double seconds;      // wall time from the call to the op's completion
    uint64_t launches;   // device commands it enqueued (Backend::launches)
    uint64_t transfers;  // host<->device copies it made (Backend::transfers)
  };
  // With time_ops: every op x dtype called since ResetTimes, in op order. A
  // fused call (MultiMatmul, MultiAttention, MultiGroupedMatmul) counts as
  // one call of its op.
  std::vector<OpTime> times() const;
  void ResetTimes();

  BackendKind kind() const override { return device_->kind(); }
  std::string name() const override { return device_->name(); }
  int num_threads() const override { return device_->num_threads(); }
  bool Supports(Op op, DType dtype) const override { return true; }
  DeviceInfo device() const override { return device_->device(); }
  bool wants_memory_plan() const override { return device_->wants_memory_plan(); }
  Status ReserveMemory(const MemoryPlan& plan) override { return device_->ReserveMemory(plan); }
  uint64_t DeviceBytesFor(const MemoryPlan& plan) const override {
    return device_->DeviceBytesFor(plan);
  }

  Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) override;
  Status ReserveForContext(const ContextShape& shape) override;
  // (ContextScratchBytes stays 0: the CPU's scratch is host memory, outside
  // the device's plan.)
  void FinishLoad() override {
    device_->FinishLoad();
    cpu_->FinishLoad();
  }
  Expected<Tensor> PrepareWeight(const TensorInfo& info) override;
  Expected<Tensor> PrepareCpuWeight(const TensorInfo& info) override;

  void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override;
  void MultiMatmul(const Tensor& x, std::span<const Projection> projections) override;
  void MultiAttention(std::span<const AttentionJob> jobs, float scale) override;
  void MultiGroupedMatmul(const Tensor& x, std::span<const GroupedProjection> projections,
                          std::span<const int32_t> offsets) override;
  void FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                   const MatmulFusion& fusion) override;
  void StepAttention(const AttentionStep& step) override;
  void Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) override;
  void Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                 std::span<const int32_t> key_rows, int64_t n_past, float scale,
                 const Tensor& out) override;
  void LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                       std::span<const int32_t> key_rows, int64_t n_past, float scale,
                       const KeySelection* selection, const Tensor& out) override;
  void HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                  int64_t y_stride) override;
  void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                   int64_t n) override;
  void IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                   std::span<const int32_t> key_rows, int64_t n_past, float scale, int64_t topk,
                   std::span<int32_t> selection, std::span<int32_t> counts) override;
  void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                 const Tensor& out) override;
  void Route(const Tensor& logits, const Tensor* selection_bias, const RouterSpec& spec,
             std::span<int32_t> ids, std::span<float> weights) override;
  void GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                     std::span<const int32_t> offsets, const Tensor& y) override;
  void ScatterRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) override;
  void GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) override;
  void ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                      std::span<const float> scales, const Tensor& dst) override;
  void Zero(const Tensor& t) override;
  void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Copy(const Tensor& src, const Tensor& dst) override;
  // A weight is read from its host copy (device copies of types the device
  // cannot run, FP8 block scales among them, are only bytes to it).
  void ReadF32(const Tensor& src, std::span<float> dst) override;
  void WriteF32(std::span<const float> src, const Tensor& dst) override {
    device_->WriteF32(src, dst);
  }
  void WriteBytes(const void* src, uint64_t bytes, const Tensor& dst) override {
    device_->WriteBytes(src, bytes, dst);
  }
  void Synchronize() override { device_->Synchronize(); }
  uint64_t launches() const override { return device_->launches(); }
  uint64_t transfers() const override { return device_->transfers(); }
  DeviceExchange* device_exchange() override { return device_->device_exchange(); }
  void Idle() override {
    device_->Idle();
    cpu_->Idle();
  }

 private:
  class HostCall;  // the copies of one fallback call
  friend class HostCall;
  class OpScope;  // records one op call, and times it with time_ops
  friend class OpScope;
  struct Mirror {
    uint64_t bytes = 0;
    std::vector<float> host;  // made on first fallback use of the buffer
  };

  // Records the call; true when it runs on the device (never when its weights
  // were prepared with PrepareCpuWeight).
  bool OnDevice(Op op, DType dtype, bool cpu_weights = false);
  bool OnCpu(std::span<const Tensor> weights) const {
    return !weights.empty() && cpu_weights_.count(weights[0].base) > 0;
  }
  // Experts in a device expert cache's slots: no host copy to fall back on,
  // so they run on the device even when GroupedMatmul is disabled.
  bool InDeviceSlots(std::span<const Tensor> weights) const {
    return !weights.empty() && slot_buffers_.count(weights[0].base) > 0;
  }
  // A fused call over `items` of `op`: when the device runs every item's
  // (op, dtype_of(item)), whole(), recorded per item and timed as one call;
  // else each(item) for every item, through that op's own fallback.
  template <class T, class DTypeOf, class Each, class Whole>
  void Fused(Op op, std::span<const T> items, const DTypeOf& dtype_of, const Each& each,
             const Whole& whole);
  void Forget(void* base) { mirrors_.erase(base); }

  std::unique_ptr<Backend> device_, cpu_;
  std::array<bool, kNumOps> disabled_{};
  static constexpr int kDTypes = kNumDTypes;
  std::array<std::array<uint64_t, kDTypes>, kNumOps> calls_{}, cpu_weight_calls_{};
  std::array<std::array<bool, kDTypes>, kNumOps> reported_{};
  bool time_ops_ = false;
  // With time_ops, per op x fusion x dtype.
  template <class T>
  using PerCall = std::array<std::array<std::array<T, kDTypes>, kFusions>, kNumOps>;
  PerCall<uint64_t> timed_calls_{}, launches_{}, transfers_{};
  PerCall<double> seconds_{};
  std::unordered_map<void*, Tensor> weights_;  // device weight base -> host tensor
  std::unordered_set<const void*> cpu_weights_;  // bases of PrepareCpuWeight's tensors
  std::unordered_set<const void*> slot_buffers_;  // kExpertCacheBuffer allocations
  std::unordered_map<void*, Mirror> mirrors_;  // device buffer base -> host copy
};

}  // namespace anymoe
