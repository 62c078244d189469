#include "backends/cuda/device_arena.h"

#include "core/check.h"

namespace anymoe::cuda {

DeviceArena::~DeviceArena() {
  for (Chunk& c : chunks_) dev_.Free(c.base);
}

Status DeviceArena::Reserve(uint64_t bytes) {
  const uint64_t n = Aligned(bytes);
  ASSIGN_OR_RETURN(void* p, dev_.Malloc(n));
  Chunk c;
  c.base = static_cast<char*>(p);
  c.size = n;
  c.free[0] = n;
  chunks_.push_back(std::move(c));
  capacity_ += n;
  return Status::Ok();
}

Expected<Region> DeviceArena::Carve(uint64_t bytes, const std::string& what) {
  if (!reserved()) {
    return Status::Error("cuda: " + what + " requested before device memory was reserved " +
                         "(load models through LoadModel, which plans and reserves it)");
  }
  const uint64_t need = Aligned(bytes);
  for (size_t ci = 0; ci < chunks_.size(); ++ci) {
    Chunk& c = chunks_[ci];
    for (auto it = c.free.begin(); it != c.free.end(); ++it) {
      if (it->second < need) continue;
      Region r;
      r.chunk = int(ci);
      r.offset = it->first;
      r.size = need;
      r.ptr = c.base + r.offset;
      const uint64_t rest = it->second - need;
      c.free.erase(it);
      if (rest > 0) c.free[r.offset + need] = rest;
      used_ += need;
      return r;
    }
  }
  return Status::Error("cuda: " + std::to_string(bytes) + " bytes for " + what +
                       " do not fit in the reserved device memory (" + std::to_string(used_) +
                       " of " + std::to_string(capacity_) +
                       " bytes in use); raise --mem-budget or lower --ctx");
}

void DeviceArena::Free(const Region& r) {
  auto& free = chunks_[size_t(r.chunk)].free;
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

}  // namespace anymoe::cuda
