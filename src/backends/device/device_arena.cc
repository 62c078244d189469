#include "backends/device/device_arena.h"

#include <algorithm>

namespace anymoe::device {

DeviceArena::~DeviceArena() {
  for (void* chunk : chunks_) rt_.DeleteChunk(chunk);
}

uint64_t DeviceArena::Aligned(uint64_t bytes) const {
  const uint64_t a = rt_.alignment();
  return std::max<uint64_t>(a, (bytes + a - 1) / a * a);
}

Status DeviceArena::Reserve(uint64_t bytes) {
  const uint64_t a = rt_.alignment();
  const uint64_t max_chunk = rt_.max_chunk_bytes() / a * a;
  for (uint64_t left = Aligned(bytes); left > 0;) {
    const uint64_t n = std::min(left, max_chunk);
    ASSIGN_OR_RETURN(void* chunk, rt_.NewChunk(n));
    ++allocations_;
    chunks_.push_back(chunk);
    ranges_.AddChunk(n);
    left -= n;
  }
  return Status::Ok();
}

Expected<Region> DeviceArena::Carve(uint64_t bytes, const std::string& what) {
  if (!reserved()) return ChunkFreeList::NotReservedError(backend_, what);
  const auto range = ranges_.Take(Aligned(bytes));
  if (!range) return ranges_.FullError(backend_, bytes, what);
  void* handle = rt_.Region(chunks_[size_t(range->chunk)], range->offset, range->size);
  return Region{handle, range->chunk, range->offset, range->size};
}

void DeviceArena::Free(const Region& r) {
  rt_.ReleaseRegion(r.handle);
  ranges_.Give({r.chunk, r.offset, r.size});
}

}  // namespace anymoe::device
