// The CUDA backend: the shared device layer (backends/device/) over
// CudaDevice, with cuBLAS SGEMM for prefill matmuls and CUDA kernels
// (kernels/*.cu) for the decode matvec of f32/f16/bf16/q8_0/q4_0/q4_1 weights
// and for every other op. Weights keep their file dtype on the device; other
// dtypes (k-quants) are declared unsupported and FallbackBackend runs those
// ops on the CPU. Activations are f32. Tensor::base is a device pointer (of
// an arena region), Tensor::offset bytes from it.
//
// Built and linked in CI (nvcc, sm_80 + sm_90); its kernels mirror the OpenCL
// backend's, which PoCL runs in CI. See docs/backends.md for what has and has
// not been run on a GPU.
#pragma once

#include <memory>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/dense_gemm.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/device/device_backend.h"

namespace anymoe::cuda {

class CudaBackend final : public device::DeviceBackend {
 public:
  static Expected<std::unique_ptr<Backend>> Create(const BackendOptions& options);
  // The weight dtypes the kernels decode (kernels/common.cuh).
  static bool RunsWeightType(DType dtype);

 private:
  CudaBackend(std::unique_ptr<CudaDevice> dev, const BackendOptions& options);
  kernels::Stream stream() const { return kernels::Stream{dev_.compute(), &dev_}; }

  bool RunsWeight(DType dtype) const override { return RunsWeightType(dtype); }
  uint64_t ExpertLocation(const Tensor& w) const override;
  Status UseScratch(const device::Region& scratch) override;
  void RunEmbedding(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void RunRmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override;
  void RunLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                    const Tensor& out) override;
  void RunMatmul(const device::MatmulArgs& m) override;
  void RunGroupedMatmul(const device::GroupedMatmulArgs& g) override;
  void RunRope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
               const RopeTable& rope) override;
  void RunAttention(const device::AttentionArgs& a) override;
  void RunHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                     int64_t y_stride, int64_t tokens) override;
  void RunCopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                      int64_t n) override;
  void RunIndexerTopK(const device::IndexerArgs& a) override;
  void RunRoute(const Tensor& logits, const Tensor* bias, const RouterSpec& spec,
                const Tensor& scratch, const Tensor& ids, const Tensor& weights) override;
  void RunScatterRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override;
  void RunGatherRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override;
  void RunScatterAddRows(const Tensor& src, const Tensor& rows, const Tensor& scales,
                         const Tensor& dst) override;
  void RunSwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void RunAdd(const Tensor& a, const Tensor& b, const Tensor& out) override;

  CudaDevice& dev_;
  DenseGemm gemm_;
};

}  // namespace anymoe::cuda
