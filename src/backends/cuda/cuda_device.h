// The CUDA objects one backend uses: the device chosen by index, a stream for
// compute and one for copies (weight uploads at load, results read back), the
// cuBLAS handle bound to the compute stream, and the pinned host twin of the
// staging ring. As the device layer's DeviceRuntime: chunks are cudaMallocs
// (the only ones), regions are device addresses, uploads go through the pinned
// twin on the compute stream, reads on the copy stream after an event.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backends/device/device_runtime.h"
#include "core/status.h"

namespace anymoe::cuda {

struct DeviceDescription {
  int index = 0;
  std::string name;          // "NVIDIA H200 (sm_90)"
  uint64_t global_memory = 0;
  int sm_major = 0, sm_minor = 0;
};

// The device layer's runtime (its memory and copies, with the pinned host twin
// of the staging ring) is CudaDevice's implementation in cuda_device.cc; what
// the kernel launchers and cuBLAS use is here.
class CudaDevice : public device::DeviceRuntime {
 public:
  // An error (never an abort) when the build has no usable device: no driver,
  // no GPU, or an index out of range.
  static Expected<std::unique_ptr<CudaDevice>> Create(int device_index);
  ~CudaDevice() override;

  const DeviceDescription& device() const { return device_; }
  // The streams and the cuBLAS handle, with this device made current on the
  // calling thread first: the server runs the model on another thread than
  // the one that created it, and CUDA's current device is per thread.
  cudaStream_t compute() const { return Bind(), compute_; }
  cudaStream_t copies() const { return Bind(), copies_; }
  cublasHandle_t blas() const { return Bind(), blas_; }

 protected:
  CudaDevice() = default;
  void Bind() const;

  DeviceDescription device_;
  cudaStream_t compute_ = nullptr, copies_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  char* staging_ = nullptr;  // the ring's device region
  char* pinned_ = nullptr;   // its host twin
};

}  // namespace anymoe::cuda
