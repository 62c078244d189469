#include "backends/device/chunk_free_list.h"

#include <iterator>

#include "core/check.h"

namespace anymoe::device {

int ChunkFreeList::AddChunk(uint64_t bytes) {
  chunks_.emplace_back();
  chunks_.back()[0] = bytes;
  capacity_ += bytes;
  return int(chunks_.size()) - 1;
}

std::optional<ChunkFreeList::Range> ChunkFreeList::Take(uint64_t bytes) {
  for (size_t ci = 0; ci < chunks_.size(); ++ci) {
    auto& free = chunks_[ci];
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes) continue;
      const Range r{int(ci), it->first, bytes};
      const uint64_t rest = it->second - bytes;
      free.erase(it);
      if (rest > 0) free[r.offset + bytes] = rest;
      used_ += bytes;
      return r;
    }
  }
  return std::nullopt;
}

void ChunkFreeList::Give(const Range& r) {
  auto& free = chunks_[size_t(r.chunk)];
  auto [it, inserted] = free.emplace(r.offset, r.size);
  CHECK(inserted);
  used_ -= r.size;
  // Coalesce with the following and the preceding free ranges.
  auto next = std::next(it);
  if (next != free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free.erase(next);
  }
  if (it != free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free.erase(it);
    }
  }
}

Status ChunkFreeList::NotReservedError(const std::string& backend, const std::string& what) {
  return Status::Error(backend + ": " + what + " requested before device memory was reserved " +
                       "(load models through LoadModel, which plans and reserves it)");
}

Status ChunkFreeList::FullError(const std::string& backend, uint64_t bytes,
                                const std::string& what) const {
  return Status::Error(backend + ": " + std::to_string(bytes) + " bytes for " + what +
                       " do not fit in the reserved device memory (" + std::to_string(used_) +
                       " of " + std::to_string(capacity_) +
                       " bytes in use); raise --mem-budget or lower --ctx");
}

}  // namespace anymoe::device
