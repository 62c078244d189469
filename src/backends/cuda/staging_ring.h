// A ring in device memory for what ops take from the host each call (token
// ids, positions, cache rows, expert weight addresses) and for op-private
// scratch (router and indexer temporaries, results read back to the host),
// with a pinned host twin that uploads go through. Reserved with the arena, so
// no call allocates. Uploads and kernels run in order on the compute stream,
// and a region is reused only after the ring wraps, which first waits for the
// stream; Begin makes one op's pieces contiguous so a wrap cannot overwrite
// them mid-op. Mirrors the OpenCL backend's StagingRing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "core/status.h"

namespace anymoe::cuda {

class StagingRing {
 public:
  StagingRing() = default;
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Binds `bytes` of device memory at `device` and allocates the pinned twin
  // (replacing an earlier, smaller binding).
  Status Init(cudaStream_t stream, char* device, uint64_t bytes);
  uint64_t size() const { return size_; }

  // Room for `bytes` (the sum of this op's Upload/Take sizes, each Rounded).
  void Begin(uint64_t bytes);
  // Copies host values into the ring; returns their device address.
  template <typename T>
  const T* Upload(std::span<const T> values) {
    return reinterpret_cast<const T*>(UploadBytes(values.data(), values.size_bytes()));
  }
  // Scratch for kernels to write; returns its device address.
  char* Take(uint64_t bytes);
  static uint64_t Rounded(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  char* UploadBytes(const void* data, uint64_t bytes);

  cudaStream_t stream_ = nullptr;
  char* device_ = nullptr;
  char* host_ = nullptr;  // pinned
  uint64_t size_ = 0, cursor_ = 0;
};

}  // namespace anymoe::cuda
