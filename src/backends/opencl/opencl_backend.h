// The OpenCL 1.2 backend: the shared device layer (backends/device/) over
// ClRuntime, with kernels/*.cl compiled at creation. Weights keep their file
// dtype on the device (f32, f16, bf16, q8_0, q4_0, q4_1 run natively; other
// dtypes are declared unsupported and FallbackBackend runs those ops on the
// CPU). Activations are f32. Tensor::base is a cl_mem (a sub-buffer of the
// arena), Tensor::offset bytes into it.
#pragma once

#include <memory>

#include "backends/device/device_backend.h"
#include "backends/opencl/cl_runtime.h"

namespace anymoe::opencl {

class OpenClBackend final : public device::DeviceBackend {
 public:
  static Expected<std::unique_ptr<Backend>> Create(const BackendOptions& options);
  // The weight dtypes the kernels decode (kernels/common.cl).
  static bool RunsWeightType(DType dtype);

 private:
  OpenClBackend(std::unique_ptr<ClRuntime> rt, const BackendOptions& options);

  bool RunsWeight(DType dtype) const override { return RunsWeightType(dtype); }
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

  ClRuntime& rt_;
};

}  // namespace anymoe::opencl
