#include "backends/cuda/device_arena.h"

namespace anymoe::cuda {

DeviceArena::~DeviceArena() {
  for (char* base : chunks_) dev_.Free(base);
}

Status DeviceArena::Reserve(uint64_t bytes) {
  const uint64_t n = Aligned(bytes);
  ASSIGN_OR_RETURN(void* p, dev_.Malloc(n));
  chunks_.push_back(static_cast<char*>(p));
  ranges_.AddChunk(n);
  return Status::Ok();
}

Expected<Region> DeviceArena::Carve(uint64_t bytes, const std::string& what) {
  if (!reserved()) return ChunkFreeList::NotReservedError("cuda", what);
  const auto range = ranges_.Take(Aligned(bytes));
  if (!range) return ranges_.FullError("cuda", bytes, what);
  return Region{chunks_[size_t(range->chunk)] + range->offset, range->chunk, range->offset,
                range->size};
}

void DeviceArena::Free(const Region& r) { ranges_.Give({r.chunk, r.offset, r.size}); }

}  // namespace anymoe::cuda
