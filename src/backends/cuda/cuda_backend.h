// The CUDA backend: cuBLAS SGEMM for prefill matmuls, CUDA kernels
// (kernels/*.cu) for the decode matvec of f32/f16/bf16/q8_0/q4_0/q4_1 weights
// and for every other op; one stream for compute and one for copies; all
// device memory in one DeviceArena reserved at load from the memory plan;
// host-side index arrays staged through a pinned ring. Weights keep their file
// dtype on the device; other dtypes (k-quants) are declared unsupported and
// FallbackBackend runs those ops on the CPU. Activations are f32. Tensor::base
// is a device pointer (of the arena region), Tensor::offset bytes from it.
//
// Built and linked in CI (nvcc, sm_80 + sm_90); its kernels mirror the OpenCL
// backend's, which PoCL runs in CI. See docs/backends.md for what has and has
// not been run on a GPU.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/dense_gemm.h"
#include "backends/cuda/device_arena.h"
#include "backends/cuda/staging_ring.h"

namespace anymoe::cuda {

class CudaBackend final : public Backend {
 public:
  static Expected<std::unique_ptr<CudaBackend>> Create(const BackendOptions& options);
  // Supports() without a device: `anymoe doctor` answers it on machines with no GPU.
  static bool SupportsOp(Op op, DType dtype);

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string name() const override { return "cuda"; }
  int num_threads() const override { return 1; }
  bool Supports(Op op, DType dtype) const override { return SupportsOp(op, dtype); }
  DeviceInfo device() const override;
  bool wants_memory_plan() const override { return true; }
  Status ReserveMemory(const MemoryPlan& plan) override;

  Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) override;
  Status ReserveForContext(int64_t max_keys) override;
  Expected<Tensor> PrepareWeight(const TensorInfo& info) override;

  void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override;
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
  void ReadF32(const Tensor& src, std::span<float> dst) override;
  void WriteF32(std::span<const float> src, const Tensor& dst) override;
  void Synchronize() override;

 private:
  CudaBackend(std::unique_ptr<CudaDevice> dev, const BackendOptions& options);
  // Device -> host on the copy stream, after the compute work queued so far.
  void ToHost(void* dst, const void* src, uint64_t bytes);

  std::unique_ptr<CudaDevice> dev_;
  DeviceArena arena_;
  StagingRing ring_;
  DenseGemm gemm_;
  Region ring_region_, gemm_region_;
  BackendOptions options_;
  int64_t max_kv_tokens_ = 0;  // the largest KV cache planned so far
  std::vector<std::unique_ptr<Buffer>> owned_;  // weights
  std::vector<int32_t> mapped_rows_;            // DSA positions -> cache rows (host)
  std::vector<uint64_t> expert_addresses_;      // GroupedMatmul: device address of each expert
};

}  // namespace anymoe::cuda
