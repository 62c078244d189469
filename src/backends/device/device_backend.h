// The shared layer under every device backend (OpenCL, CUDA, ...). It
// implements the whole Backend interface once: memory reserved from the plan
// and carved from one arena, weight upload, a staging ring for host arrays,
// host readback, the Route / IndexerTopK / attention host code, the split of
// fused calls a device cannot fuse, and every op's contract (shapes, dtypes)
// checked in one place. Its op entry points are final: they check, stage, and
// call the backend's kernel launchers (the Run* hooks), which is all a device
// backend writes, with its runtime (DeviceRuntime) and a registration.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/backend_registry.h"
#include "backends/device/device_arena.h"
#include "backends/device/device_runtime.h"
#include "backends/device/kernel_args.h"
#include "backends/device/staging_ring.h"

namespace anymoe::device {

// What a device backend's kernels can do; the layer adapts the ops to it.
struct DeviceTraits {
  std::string name;  // "opencl": Backend::name() and the first word of its errors
  BackendKind kind = BackendKind::kOpenCl;
  int64_t max_head_dim = 1024;  // d_k and d_v of attention, LatentAttention's row width
  // GroupedMatmul is one launch when no group has more rows than this (else a
  // Matmul per group, for backends that switch to GEMM for long groups) ...
  int64_t grouped_max_rows = INT64_MAX;
  // ... and, where set, only when every expert lies in one buffer
  // (ExpertLocation is then an offset in it).
  bool grouped_one_buffer = false;
  // RunMatmul takes MatmulArgs with a norm, up to max_fused_projections
  // projections, SwiGLU or a residual add; else the layer makes the separate calls.
  bool fused_matmul = false;
  int max_fused_projections = 3;
  // RunDecodeAttention exists; else a decode step's StepAttention is RoPE,
  // cache writes and batched attention as separate launches.
  bool fused_decode_attention = false;
  // Device memory the kernels need besides staging (a GEMM workspace): carved
  // at the first ReserveMemory and handed to UseScratch.
  uint64_t scratch_bytes = 0;
  std::string scratch_what;
};

// Supports() of a device backend: Embedding, Matmul and GroupedMatmul where its
// kernels run the weight dtype (`runs_weight`), every other op in f32. Also
// what a backend's registry entry answers without a device.
bool DeviceSupports(Op op, DType dtype, bool runs_weight);

// The weight dtypes the OpenCL and CUDA kernels decode themselves (OpenCL's
// kernels/common.cl, CUDA's kernels/weight_decode.cuh decode the same list with the
// CPU dequantisers' operations); the others take the CPU fallback.
bool KernelsDecodeWeight(DType dtype);

class DeviceBackend : public Backend {
 public:
  ~DeviceBackend() override;

  BackendKind kind() const final { return traits_.kind; }
  std::string name() const final { return traits_.name; }
  int num_threads() const final { return 1; }
  bool Supports(Op op, DType dtype) const final;
  DeviceInfo device() const final;
  bool wants_memory_plan() const final { return true; }
  Status ReserveMemory(const MemoryPlan& plan) final;
  uint64_t DeviceBytesFor(const MemoryPlan& plan) const final;
  uint64_t launches() const final { return rt_->launches(); }
  uint64_t transfers() const final { return rt_->transfers(); }
  DeviceExchange* device_exchange() final { return rt_->exchange(); }

  Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) final;
  Status ReserveForContext(const ContextShape& shape) final;
  Expected<Tensor> PrepareWeight(const TensorInfo& info) final;

  void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) final;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) final;
  void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) final;
  void MultiMatmul(const Tensor& x, std::span<const Projection> projections) final;
  void FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                   const MatmulFusion& fusion) final;
  void StepAttention(const AttentionStep& step) final;
  void Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) final;
  void Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                 std::span<const int32_t> key_rows, int64_t n_past, float scale,
                 const Tensor& out) final;
  void LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                       std::span<const int32_t> key_rows, int64_t n_past, float scale,
                       const KeySelection* selection, const Tensor& out) final;
  void HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                  int64_t y_stride) final;
  void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                   int64_t n) final;
  void IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                   std::span<const int32_t> key_rows, int64_t n_past, float scale, int64_t topk,
                   std::span<int32_t> selection, std::span<int32_t> counts) final;
  void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                 const Tensor& out) final;
  void Route(const Tensor& logits, const Tensor* selection_bias, const RouterSpec& spec,
             std::span<int32_t> ids, std::span<float> weights) final;
  void GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                     std::span<const int32_t> offsets, const Tensor& y) final;
  void ScatterRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) final;
  void GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) final;
  void ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                      std::span<const float> scales, const Tensor& dst) final;
  void Zero(const Tensor& t) final;
  void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) final;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) final;
  void Copy(const Tensor& src, const Tensor& dst) final;
  void ReadF32(const Tensor& src, std::span<float> dst) final;
  void WriteF32(std::span<const float> src, const Tensor& dst) final;
  void WriteBytes(const void* src, uint64_t bytes, const Tensor& dst) final;
  void Synchronize() final;

 protected:
  DeviceBackend(std::unique_ptr<DeviceRuntime> rt, DeviceTraits traits,
                const BackendOptions& options);
  DeviceRuntime& runtime() const { return *rt_; }

  // ---- what a device backend implements: its weight dtypes and its kernel
  // launchers. Arguments are checked; launchers enqueue and return.
  virtual bool RunsWeight(DType dtype) const = 0;
  // Where GroupedMatmul's kernel finds an expert's weight (staged per call): a
  // byte offset in the shared buffer by default, a device address on CUDA.
  virtual uint64_t ExpertLocation(const Tensor& w) const { return w.offset; }
  virtual Status UseScratch(const Region& scratch) { return Status::Ok(); }

  virtual void RunEmbedding(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;
  virtual void RunRmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) = 0;
  virtual void RunLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                            const Tensor& out) = 0;
  virtual void RunMatmul(const MatmulArgs& m) = 0;
  virtual void RunGroupedMatmul(const GroupedMatmulArgs& g) = 0;
  // In place on x [T, heads, head_dim].
  virtual void RunRope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                       const RopeTable& rope) = 0;
  virtual void RunAttention(const AttentionArgs& a) = 0;
  virtual void RunDecodeAttention(const DecodeAttentionArgs& a) {}
  // y[t, h, :d_out] = W[h] . x[t, h, :d_in] over strided head slots.
  virtual void RunHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                             int64_t y_stride, int64_t tokens) = 0;
  virtual void RunCopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                              int64_t dst_col, int64_t n) = 0;
  virtual void RunIndexerTopK(const IndexerArgs& a) = 0;
  // scratch: per token 3 * E + 2 * max(n_group, 1) floats.
  virtual void RunRoute(const Tensor& logits, const Tensor* bias, const RouterSpec& spec,
                        const Tensor& scratch, const Tensor& ids, const Tensor& weights) = 0;
  // Rows as 4-byte words: dst[rows[i]] = src[i] / dst[i] = src[rows[i]].
  virtual void RunScatterRows(const Tensor& src, const Tensor& rows, const Tensor& dst) = 0;
  virtual void RunGatherRows(const Tensor& src, const Tensor& rows, const Tensor& dst) = 0;
  // dst[rows[i]] += scales[i] * src[i], rows in order.
  virtual void RunScatterAddRows(const Tensor& src, const Tensor& rows, const Tensor& scales,
                                 const Tensor& dst) = 0;
  virtual void RunSwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  virtual void RunAdd(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

 private:
  class ArenaBuffer;
  void ReadBytes(const Tensor& src, uint64_t bytes, void* dst);
  // What ReserveMemory(plan) reserves at least, and its parts in words.
  uint64_t Needed(const MemoryPlan& plan, std::string* breakdown) const;
  void CheckMatmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) const;
  // StepAttention's parts: the checks (true when every segment shares one
  // cache, as a batched launch needs), and the batched form.
  bool CheckStep(const AttentionStep& step) const;
  void StageKeyTables(const AttentionStep& step);
  void BatchedStepAttention(const AttentionStep& step);

  std::unique_ptr<DeviceRuntime> rt_;
  std::mutex write_mu_;  // WriteBytes (the expert cache's I/O threads)
  DeviceTraits traits_;
  BackendOptions options_;
  DeviceArena arena_;
  StagingRing ring_;
  Region ring_region_, scratch_region_;
  int64_t max_kv_tokens_ = 0;                   // the largest KV cache planned so far
  std::vector<std::unique_ptr<Buffer>> owned_;  // weights
  std::vector<int32_t> mapped_rows_;            // DSA positions -> cache rows (host)
  std::vector<uint64_t> expert_locations_;      // GroupedMatmul: ExpertLocation of each group
  std::vector<int32_t> shifted_offsets_;        // GroupedMatmul: offsets of a run not at row 0
  // StepAttention's host arrays: the sequences' key rows end to end, each
  // row's start in them, each row's key count, the step's new cache rows.
  std::vector<int32_t> step_tables_, step_starts_, step_counts_, step_new_rows_;
};

// The registry entry of a device backend named `name` (what its plugin hands
// the host): its runtime from Runtime::Create(options.device), then
// B(runtime, options); Supports answered without a device from `kRunsWeight`.
template <class Runtime, class B, bool (*kRunsWeight)(DType)>
BackendEntry DeviceBackendEntry(const char* name) {
  return BackendEntry{
      .name = name,
      .create = [](const BackendOptions& options) -> Expected<std::unique_ptr<Backend>> {
        ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create(options.device));
        return std::unique_ptr<Backend>(new B(std::move(rt), options));
      },
      .supports = [](Op op, DType dtype) { return DeviceSupports(op, dtype, kRunsWeight(dtype)); },
  };
}

}  // namespace anymoe::device
