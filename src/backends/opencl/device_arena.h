// Device memory reserved once at load (ReserveMemory) and carved into
// sub-buffers for weights, KV caches, activations and the backend's scratch.
// clCreateBuffer is called only by Reserve, so once a model is loaded nothing a
// token does can allocate device memory; a KV cache freed at the end of a
// sequence returns its bytes to the free list for the next one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/chunk_free_list.h"
#include "backends/opencl/cl_runtime.h"

namespace anymoe::opencl {

struct Region {
  cl_mem mem = nullptr;  // a sub-buffer of one chunk
  int chunk = -1;
  uint64_t offset = 0;  // in the chunk
  uint64_t size = 0;    // rounded up to the alignment
};

class DeviceArena {
 public:
  explicit DeviceArena(ClRuntime& rt) : rt_(rt) {}
  ~DeviceArena();

  // Creates chunks (each at most the device's largest allocation) of `bytes` in all.
  Status Reserve(uint64_t bytes);
  bool reserved() const { return !ranges_.empty(); }
  uint64_t capacity() const { return ranges_.capacity(); }
  uint64_t used() const { return ranges_.used(); }
  // Bytes a request of `bytes` takes once aligned.
  uint64_t Aligned(uint64_t bytes) const;

  // First fit over the chunks; a clear error naming `what` when nothing fits.
  Expected<Region> Carve(uint64_t bytes, const std::string& what);
  void Free(const Region& r);

 private:
  ClRuntime& rt_;
  std::vector<cl_mem> chunks_;  // the buffer of each chunk of ranges_
  ChunkFreeList ranges_;
};

}  // namespace anymoe::opencl
