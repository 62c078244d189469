// The CUDA objects one backend uses: the device chosen by index, a stream for
// compute and one for copies (weight uploads at load, results read back), the
// cuBLAS handle bound to the compute stream, and the only cudaMalloc of the
// backend (counted, so tests can prove that no token allocates).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace anymoe::cuda {

struct DeviceDescription {
  int index = 0;
  std::string name;          // "NVIDIA H200 (sm_90)"
  uint64_t global_memory = 0;
  int sm_major = 0, sm_minor = 0;
};

class CudaDevice {
 public:
  // An error (never an abort) when the build has no usable device: no driver,
  // no GPU, or an index out of range.
  static Expected<std::unique_ptr<CudaDevice>> Create(int device_index);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceDescription& device() const { return device_; }
  // The streams and the cuBLAS handle, with this device made current on the
  // calling thread first: the server runs the model on another thread than
  // the one that created it, and CUDA's current device is per thread.
  cudaStream_t compute() const { return Bind(), compute_; }
  cudaStream_t copies() const { return Bind(), copies_; }
  cublasHandle_t blas() const { return Bind(), blas_; }

  // Device memory: the one place it is allocated.
  Expected<void*> Malloc(uint64_t bytes);
  void Free(void* p);
  uint64_t allocations() const { return allocations_; }
  // Bytes the device has free now (cudaMemGetInfo).
  uint64_t FreeBytes() const;

  // Makes the copy stream wait for the compute work queued so far (results
  // read back after the kernels that wrote them).
  void CopiesAfterCompute();

 private:
  CudaDevice() = default;
  void Bind() const;

  DeviceDescription device_;
  cudaStream_t compute_ = nullptr, copies_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  uint64_t allocations_ = 0;
};

}  // namespace anymoe::cuda
