// Device memory reserved once at load (ReserveMemory) with one cudaMalloc and
// carved into regions for weights, KV caches, activations and the backend's
// scratch. Once a model is loaded nothing a token does allocates; a KV cache
// freed at the end of a sequence returns its bytes for the next one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/chunk_free_list.h"
#include "backends/cuda/cuda_device.h"

namespace anymoe::cuda {

struct Region {
  char* ptr = nullptr;  // device address
  int chunk = -1;
  uint64_t offset = 0;  // in the chunk
  uint64_t size = 0;    // rounded up to kAlign
};

class DeviceArena {
 public:
  static constexpr uint64_t kAlign = 256;  // cudaMalloc's own alignment

  explicit DeviceArena(CudaDevice& dev) : dev_(dev) {}
  ~DeviceArena();

  // Adds a chunk of `bytes` (one cudaMalloc); each model loaded adds its own.
  Status Reserve(uint64_t bytes);
  bool reserved() const { return !ranges_.empty(); }
  uint64_t capacity() const { return ranges_.capacity(); }
  uint64_t used() const { return ranges_.used(); }
  static uint64_t Aligned(uint64_t bytes) {
    return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  }

  // First fit over the chunks; a clear error naming `what` when nothing fits.
  Expected<Region> Carve(uint64_t bytes, const std::string& what);
  void Free(const Region& r);

 private:
  CudaDevice& dev_;
  std::vector<char*> chunks_;  // device base of each chunk of ranges_
  ChunkFreeList ranges_;
};

}  // namespace anymoe::cuda
