// A ring in device memory for what ops take from the host each call (token
// ids, positions, cache rows, expert weight locations) and for op-private
// scratch (router and indexer temporaries, results read back to the host).
// Carved from the arena at load, so no call allocates. Uploads are ordered
// before the launches that follow them, and a piece is reused only after the
// ring wraps, which first waits for the device; Begin makes one op's pieces
// contiguous so a wrap cannot overwrite them mid-op. Pieces are Tensors
// (base = the ring's region), so kernels take them like any other operand.
#pragma once

#include <cstdint>
#include <span>

#include "backends/device/device_runtime.h"
#include "core/tensor.h"

namespace anymoe::device {

class StagingRing {
 public:
  // Every piece starts at a multiple of kAlign bytes (enough for any kernel
  // operand, and for CUDA's vectorised loads).
  static constexpr uint64_t kAlign = 256;
  static uint64_t Rounded(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  explicit StagingRing(DeviceRuntime& rt) : rt_(rt) {}
  void Bind(void* region, uint64_t bytes) {
    region_ = region;
    size_ = bytes;
    cursor_ = 0;
  }
  void* region() const { return region_; }
  uint64_t size() const { return size_; }

  // Room for `bytes`: the sum of this op's Upload/Take sizes, each Rounded.
  void Begin(uint64_t bytes);
  // Host values copied into the ring, as a 1-D tensor of `dtype`.
  template <typename T>
  Tensor Upload(std::span<const T> values, DType dtype) {
    return UploadBytes(values.data(), values.size_bytes(), dtype, int64_t(values.size()));
  }
  Tensor Upload(std::span<const int32_t> values) { return Upload(values, DType::kI32); }
  Tensor Upload(std::span<const float> values) { return Upload(values, DType::kF32); }
  // 64-bit values (expert weight locations), typed as pairs of 32-bit words.
  Tensor Upload(std::span<const uint64_t> values) {
    return UploadBytes(values.data(), values.size_bytes(), DType::kI32, 2 * int64_t(values.size()));
  }
  // Scratch for kernels to write: `count` elements of `dtype` (4 bytes each).
  Tensor Take(int64_t count, DType dtype);

 private:
  Tensor UploadBytes(const void* data, uint64_t bytes, DType dtype, int64_t count);
  Tensor Piece(uint64_t bytes, DType dtype, int64_t count);

  DeviceRuntime& rt_;
  void* region_ = nullptr;
  uint64_t size_ = 0, cursor_ = 0;
};

}  // namespace anymoe::device
