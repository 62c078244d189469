// A ring in device memory for what ops take from the host each call (token ids,
// positions, cache rows, expert offsets) and for op-private scratch (router and
// indexer temporaries, results read back to the host). Reserved with the arena,
// so no call allocates. The queue is in order and host writes are blocking, so
// a region is reused only after every kernel that read it has run; Begin makes
// one op's pieces contiguous so a wrap cannot overwrite them mid-op.
#pragma once

#include <cstdint>

#include "backends/opencl/cl_runtime.h"

namespace anymoe::opencl {

class StagingRing {
 public:
  void Init(cl_command_queue queue, cl_mem mem, uint64_t bytes) {
    queue_ = queue;
    mem_ = mem;
    size_ = bytes;
    cursor_ = 0;
  }
  cl_mem mem() const { return mem_; }
  uint64_t size() const { return size_; }

  // Room for `bytes` (the sum of this op's Upload/Take sizes, each rounded to 16).
  void Begin(uint64_t bytes);
  // Copies host bytes into the ring; returns their byte offset.
  uint64_t Upload(const void* data, uint64_t bytes);
  // Scratch for kernels to write; returns its byte offset.
  uint64_t Take(uint64_t bytes);
  static uint64_t Rounded(uint64_t bytes) { return (bytes + 15) / 16 * 16; }

 private:
  cl_command_queue queue_ = nullptr;
  cl_mem mem_ = nullptr;
  uint64_t size_ = 0, cursor_ = 0;
};

}  // namespace anymoe::opencl
