#include "backends/opencl/device_arena.h"

#include <algorithm>

#include "core/check.h"

namespace anymoe::opencl {

DeviceArena::~DeviceArena() {
  for (Chunk& c : chunks_) clReleaseMemObject(c.mem);
}

uint64_t DeviceArena::Aligned(uint64_t bytes) const {
  const uint64_t a = rt_.device().base_align;
  return std::max<uint64_t>(a, (bytes + a - 1) / a * a);
}

Status DeviceArena::Reserve(uint64_t bytes) {
  // Called once per model loaded on this backend; each adds its own chunks.
  const uint64_t max_chunk =
      rt_.device().max_alloc / rt_.device().base_align * rt_.device().base_align;
  for (uint64_t left = Aligned(bytes); left > 0;) {
    const uint64_t n = std::min(left, max_chunk);
    ASSIGN_OR_RETURN(cl_mem mem, rt_.CreateBuffer(n));
    Chunk c;
    c.mem = mem;
    c.size = n;
    c.free[0] = n;
    chunks_.push_back(std::move(c));
    capacity_ += n;
    left -= n;
  }
  return Status::Ok();
}

Expected<Region> DeviceArena::Carve(uint64_t bytes, const std::string& what) {
  if (!reserved()) {
    return Status::Error("opencl: " + what + " requested before device memory was reserved " +
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
      const uint64_t rest = it->second - need;
      c.free.erase(it);
      if (rest > 0) c.free[r.offset + need] = rest;
      cl_buffer_region region{r.offset, need};
      cl_int err = CL_SUCCESS;
      r.mem =
          clCreateSubBuffer(c.mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
      CheckCl(err, "clCreateSubBuffer");
      used_ += need;
      return r;
    }
  }
  return Status::Error("opencl: " + std::to_string(bytes) + " bytes for " + what +
                       " do not fit in the reserved device memory (" + std::to_string(used_) +
                       " of " + std::to_string(capacity_) +
                       " bytes in use); raise --mem-budget or lower --ctx");
}

void DeviceArena::Free(const Region& r) {
  clReleaseMemObject(r.mem);
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

}  // namespace anymoe::opencl
