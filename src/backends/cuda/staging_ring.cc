#include "backends/cuda/staging_ring.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "core/check.h"

namespace anymoe::cuda {

StagingRing::~StagingRing() {
  if (host_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaFreeHost(host_);
  }
}

Status StagingRing::Init(cudaStream_t stream, char* device, uint64_t bytes) {
  if (host_ != nullptr) {
    CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    CheckCuda(cudaFreeHost(host_), "cudaFreeHost");
    host_ = nullptr;
  }
  void* host = nullptr;
  if (const cudaError_t err = cudaMallocHost(&host, bytes); err != cudaSuccess) {
    cudaGetLastError();
    return Status::Error("cuda: cannot pin " + std::to_string(bytes) +
                         " bytes of host staging: " + cudaGetErrorString(err));
  }
  stream_ = stream;
  device_ = device;
  host_ = static_cast<char*>(host);
  size_ = bytes;
  cursor_ = 0;
  return Status::Ok();
}

void StagingRing::Begin(uint64_t bytes) {
  if (bytes > size_) {
    std::fprintf(stderr, "anymoe: cuda: an op needs %llu bytes of staging but %llu were planned\n",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(size_));
    std::abort();
  }
  if (cursor_ + bytes > size_) {
    CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (staging wrap)");
    cursor_ = 0;
  }
}

char* StagingRing::Take(uint64_t bytes) {
  const uint64_t at = cursor_;
  cursor_ += Rounded(bytes);
  CHECK(cursor_ <= size_);
  return device_ + at;
}

char* StagingRing::UploadBytes(const void* data, uint64_t bytes) {
  char* dst = Take(bytes);
  if (bytes > 0) {
    char* pinned = host_ + (dst - device_);
    std::memcpy(pinned, data, bytes);
    CheckCuda(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync (staging)");
  }
  return dst;
}

}  // namespace anymoe::cuda
