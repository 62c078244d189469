// The bookkeeping half of a device memory arena: chunks reserved once at load,
// first-fit carving of aligned ranges, and coalescing when a range comes back
// (a KV cache freed at the end of a sequence). Offsets only: DeviceArena
// turns a range into a handle of the backend's runtime.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace anymoe::device {

class ChunkFreeList {
 public:
  struct Range {
    int chunk = -1;
    uint64_t offset = 0;  // in the chunk
    uint64_t size = 0;
  };

  // Adds a chunk of `bytes`; returns its index.
  int AddChunk(uint64_t bytes);
  // First fit over the chunks, or nothing when no free range holds `bytes`.
  std::optional<Range> Take(uint64_t bytes);
  // Returns a range from Take, merging it with its free neighbours.
  void Give(const Range& r);

  bool empty() const { return chunks_.empty(); }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }

  // The errors an arena reports: asked before Reserve, and out of room.
  static Status NotReservedError(const std::string& backend, const std::string& what);
  Status FullError(const std::string& backend, uint64_t bytes, const std::string& what) const;

 private:
  std::vector<std::map<uint64_t, uint64_t>> chunks_;  // per chunk: free offset -> size
  uint64_t capacity_ = 0, used_ = 0;
};

}  // namespace anymoe::device
