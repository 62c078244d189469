// All device memory of a backend: chunks reserved at load (ReserveMemory; the
// only device allocations, counted so tests can prove that no token allocates)
// and carved first-fit into regions for weights, KV caches, activations and
// the backend's scratch. A KV cache freed at the end of a sequence returns its
// bytes for the next one. Works through the backend's DeviceRuntime, so it is
// the same code on every device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/device/chunk_free_list.h"
#include "backends/device/device_runtime.h"

namespace anymoe::device {

struct Region {
  void* handle = nullptr;  // what Tensor::base holds (DeviceRuntime::Region)
  int chunk = -1;
  uint64_t offset = 0;  // in the chunk
  uint64_t size = 0;    // rounded up to the alignment
};

class DeviceArena {
 public:
  DeviceArena(DeviceRuntime& rt, std::string backend) : rt_(rt), backend_(std::move(backend)) {}
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Adds chunks (each at most the runtime's largest allocation) of `bytes` in
  // all; each model loaded on the backend adds its own.
  Status Reserve(uint64_t bytes);
  bool reserved() const { return !ranges_.empty(); }
  uint64_t capacity() const { return ranges_.capacity(); }
  uint64_t used() const { return ranges_.used(); }
  uint64_t allocations() const { return allocations_; }
  // Bytes a request of `bytes` takes once aligned (at least one alignment unit).
  uint64_t Aligned(uint64_t bytes) const;

  // First fit over the chunks; a clear error naming `what` when nothing fits.
  Expected<Region> Carve(uint64_t bytes, const std::string& what);
  void Free(const Region& r);

 private:
  DeviceRuntime& rt_;
  std::string backend_;
  std::vector<void*> chunks_;  // the runtime's chunk of each chunk of ranges_
  ChunkFreeList ranges_;
  uint64_t allocations_ = 0;
};

}  // namespace anymoe::device
