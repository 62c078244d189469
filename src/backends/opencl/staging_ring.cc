#include "backends/opencl/staging_ring.h"

#include <cstdio>
#include <cstdlib>

#include "core/check.h"

namespace anymoe::opencl {

void StagingRing::Begin(uint64_t bytes) {
  if (bytes > size_) {
    std::fprintf(stderr,
                 "anymoe: opencl: an op needs %llu bytes of staging but %llu were planned\n",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(size_));
    std::abort();
  }
  if (cursor_ + bytes > size_) {
    CheckCl(clFinish(queue_), "clFinish");
    cursor_ = 0;
  }
}

uint64_t StagingRing::Take(uint64_t bytes) {
  const uint64_t at = cursor_;
  cursor_ += Rounded(bytes);
  CHECK(cursor_ <= size_);
  return at;
}

uint64_t StagingRing::Upload(const void* data, uint64_t bytes) {
  const uint64_t at = Take(bytes);
  if (bytes > 0) {
    CheckCl(clEnqueueWriteBuffer(queue_, mem_, CL_TRUE, at, bytes, data, 0, nullptr, nullptr),
            "clEnqueueWriteBuffer (staging)");
  }
  return at;
}

}  // namespace anymoe::opencl
