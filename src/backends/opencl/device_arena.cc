#include "backends/opencl/device_arena.h"

#include <algorithm>

namespace anymoe::opencl {

DeviceArena::~DeviceArena() {
  for (cl_mem mem : chunks_) clReleaseMemObject(mem);
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
    chunks_.push_back(mem);
    ranges_.AddChunk(n);
    left -= n;
  }
  return Status::Ok();
}

Expected<Region> DeviceArena::Carve(uint64_t bytes, const std::string& what) {
  if (!reserved()) return ChunkFreeList::NotReservedError("opencl", what);
  const auto range = ranges_.Take(Aligned(bytes));
  if (!range) return ranges_.FullError("opencl", bytes, what);
  cl_buffer_region region{range->offset, range->size};
  cl_int err = CL_SUCCESS;
  Region r;
  r.mem = clCreateSubBuffer(chunks_[size_t(range->chunk)], CL_MEM_READ_WRITE,
                            CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  CheckCl(err, "clCreateSubBuffer");
  r.chunk = range->chunk;
  r.offset = range->offset;
  r.size = range->size;
  return r;
}

void DeviceArena::Free(const Region& r) {
  clReleaseMemObject(r.mem);
  ranges_.Give({r.chunk, r.offset, r.size});
}

}  // namespace anymoe::opencl
