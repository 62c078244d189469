// The CUDA objects one backend uses: the device chosen by index, a stream for
// compute and one for copies (weight uploads at load, results read back), the
// cuBLAS handle bound to the compute stream, and the pinned host twin of the
// staging ring. As the device layer's DeviceRuntime: chunks are cudaMallocs
// (the only ones), regions are device addresses.
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

class CudaDevice final : public device::DeviceRuntime {
 public:
  // An error (never an abort) when the build has no usable device: no driver,
  // no GPU, or an index out of range.
  static Expected<std::unique_ptr<CudaDevice>> Create(int device_index);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceDescription& device() const { return device_; }
  // The streams and the cuBLAS handle, with this device made current on the
  // calling thread first: the server runs the model on another thread than
  // the one that created it, and CUDA's current device is per thread.
  cudaStream_t compute() const { return Bind(), compute_; }
  cudaStream_t copies() const { return Bind(), copies_; }
  cublasHandle_t blas() const { return Bind(), blas_; }

  std::string device_name() const override { return device_.name; }
  uint64_t device_memory() const override { return device_.global_memory; }
  uint64_t available_memory() const override;  // cudaMemGetInfo's free bytes
  uint64_t alignment() const override { return 256; }  // cudaMalloc's own
  Expected<void*> NewChunk(uint64_t bytes) override;
  void DeleteChunk(void* chunk) override;
  void* Region(void* chunk, uint64_t offset, uint64_t bytes) override {
    return static_cast<char*>(chunk) + offset;
  }
  // Pins a host twin of the ring: uploads are a memcpy into it and an async
  // copy on the compute stream, ordered before the kernels that read them.
  Status BindStaging(void* region, uint64_t bytes) override;
  void Finish() override;

 private:
  CudaDevice() = default;
  void Bind() const;
  // Makes the copy stream wait for the compute work queued so far (results
  // read back after the kernels that wrote them).
  void CopiesAfterCompute();
  void DoWrite(void* base, uint64_t offset, const void* src, uint64_t bytes) override;
  void DoRead(const void* base, uint64_t offset, void* dst, uint64_t bytes) override;
  void DoStage(void* ring, uint64_t offset, const void* src, uint64_t bytes) override;
  void DoFillZero(void* base, uint64_t offset, uint64_t bytes) override;
  void DoCopy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
              uint64_t bytes) override;

  DeviceDescription device_;
  cudaStream_t compute_ = nullptr, copies_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  char* staging_ = nullptr;  // the ring's device region
  char* pinned_ = nullptr;   // its host twin
};

}  // namespace anymoe::cuda
