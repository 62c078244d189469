#include "backends/device/staging_ring.h"

#include <cstdio>
#include <cstdlib>

namespace anymoe::device {

void StagingRing::Begin(uint64_t bytes) {
  if (bytes > size_) {
    std::fprintf(stderr, "anymoe: an op needs %llu bytes of device staging but %llu were planned\n",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(size_));
    std::abort();
  }
  if (cursor_ + bytes > size_) {
    rt_.Finish();  // every kernel that read the ring has run
    cursor_ = 0;
  }
}

Tensor StagingRing::Piece(uint64_t bytes, DType dtype, int64_t count) {
  Tensor t = Tensor::Of(region_, dtype, {count});
  t.offset = cursor_;
  cursor_ += Rounded(bytes);
  CHECK(cursor_ <= size_);
  return t;
}

Tensor StagingRing::Take(int64_t count, DType dtype) {
  return Piece(uint64_t(count) * 4, dtype, count);
}

Tensor StagingRing::UploadBytes(const void* data, uint64_t bytes, DType dtype, int64_t count) {
  const Tensor t = Piece(bytes, dtype, count);
  if (bytes > 0) rt_.Stage(region_, t.offset, data, bytes);
  return t;
}

}  // namespace anymoe::device
