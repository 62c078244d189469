// The prefill path of Matmul: y [T, n] = x [T, k] . W^T with cuBLAS SGEMM in
// f32. f32 weights go to cublasSgemm as they are; f16, bf16 and the GGUF
// block formats are first decoded to f32 a tile of rows at a time into a
// scratch buffer from the arena (so activations stay f32 and results stay
// within the CPU backend's tolerance, and no weight is kept twice).
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernels/kernels.h"

namespace anymoe::cuda {

struct DeviceWeight {
  const char* data = nullptr;  // device address of row 0
  uint64_t row_bytes = 0;
  int dtype = 0;           // kernels::WeightType
  kernels::Scales scales;  // FP8 block scales (grid null: none)
};

class DenseGemm {
 public:
  // Scratch for decoded weight tiles, and cuBLAS's workspace (so that cuBLAS
  // does not allocate either), both carved from the arena.
  static constexpr uint64_t kTileBytes = uint64_t(32) << 20;
  static constexpr uint64_t kWorkspaceBytes = uint64_t(32) << 20;

  void Init(CudaDevice& dev, char* tile, char* workspace);
  // Enqueues on the compute stream.
  void Run(const float* x, int tokens, int k, const DeviceWeight& w, int n, float* y);

 private:
  CudaDevice* dev_ = nullptr;
  float* tile_ = nullptr;
};

}  // namespace anymoe::cuda
