#include "backends/cuda/cuda_device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/kernels.h"
#ifdef ANYMOE_HAVE_NCCL
#include "backends/cuda/nccl_exchange.h"
#endif
#include "core/check.h"

namespace anymoe::cuda {

void CheckCuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "anymoe: cuda: %s failed: %s (%s)\n", what, cudaGetErrorName(err),
               cudaGetErrorString(err));
  std::abort();
}

void CheckCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "anymoe: cuda: %s failed: %s\n", what, cublasGetStatusName(status));
  std::abort();
}

namespace kernels {

void CheckLaunch(const Stream& s, const char* kernel) {
  s.device->CountLaunch();
  CheckCuda(cudaGetLastError(), kernel);
}

}  // namespace kernels

namespace {

// CudaDevice as the device layer sees it (see cuda_device.h).
class CudaMemory final : public CudaDevice {
 public:
  std::string device_name() const override { return device_.name; }
  uint64_t device_memory() const override { return device_.global_memory; }
  uint64_t available_memory() const override {  // cudaMemGetInfo's free bytes
    Bind();
    size_t free = 0, total = 0;
    CheckCuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return free;
  }
  uint64_t alignment() const override { return 256; }  // cudaMalloc's own

  Expected<void*> NewChunk(uint64_t bytes) override {
    Bind();
    void* p = nullptr;
    if (const cudaError_t err = cudaMalloc(&p, bytes); err != cudaSuccess) {
      cudaGetLastError();
      return Status::Error("cuda: cudaMalloc of " + std::to_string(bytes) + " bytes on " +
                           device_.name + " failed: " + cudaGetErrorString(err));
    }
    return p;
  }
  void DeleteChunk(void* chunk) override { CheckCuda(cudaFree(chunk), "cudaFree"); }
  void* Region(void* chunk, uint64_t offset, uint64_t bytes) override {
    return static_cast<char*>(chunk) + offset;
  }
  // Pins a host twin of the ring: an upload is a memcpy into it and an async
  // copy on the compute stream, ordered before the kernels that read it.
  Status BindStaging(void* region, uint64_t bytes) override {
    if (pinned_ != nullptr) {
      CheckCuda(cudaStreamSynchronize(compute()), "cudaStreamSynchronize");
      CheckCuda(cudaFreeHost(pinned_), "cudaFreeHost");
      pinned_ = nullptr;
    }
    void* host = nullptr;
    if (const cudaError_t err = cudaMallocHost(&host, bytes); err != cudaSuccess) {
      cudaGetLastError();
      return Status::Error("cuda: cannot pin " + std::to_string(bytes) +
                           " bytes of host staging: " + cudaGetErrorString(err));
    }
    staging_ = static_cast<char*>(region);
    pinned_ = static_cast<char*>(host);
    return Status::Ok();
  }
  void Finish() override { CheckCuda(cudaStreamSynchronize(compute()), "cudaStreamSynchronize"); }
#ifdef ANYMOE_HAVE_NCCL
  DeviceExchange* exchange() override {
    if (!exchange_) exchange_ = std::make_unique<NcclExchange>(*this);
    return exchange_.get();
  }
#endif

 private:
#ifdef ANYMOE_HAVE_NCCL
  // Made at the first use, destroyed before the streams (a member of the
  // derived class goes first).
  std::unique_ptr<NcclExchange> exchange_;
#endif
  // Makes the copy stream wait for the compute work queued so far (results
  // read back after the kernels that wrote them).
  void CopiesAfterCompute() {
    CheckCuda(cudaEventRecord(compute_done_, compute()), "cudaEventRecord");
    CheckCuda(cudaStreamWaitEvent(copies_, compute_done_, 0), "cudaStreamWaitEvent");
  }
  // After whatever queued compute work still uses the destination; done before returning.
  void DoWrite(void* base, uint64_t offset, const void* src, uint64_t bytes) override {
    CopiesAfterCompute();
    CheckCuda(cudaMemcpyAsync(static_cast<char*>(base) + offset, src, bytes,
                              cudaMemcpyHostToDevice, copies()),
              "cudaMemcpyAsync (from host)");
    CheckCuda(cudaStreamSynchronize(copies()), "cudaStreamSynchronize (from host)");
  }
  // On the copy stream, after the compute work queued so far.
  void DoRead(const void* base, uint64_t offset, void* dst, uint64_t bytes) override {
    CopiesAfterCompute();
    CheckCuda(cudaMemcpyAsync(dst, static_cast<const char*>(base) + offset, bytes,
                              cudaMemcpyDeviceToHost, copies()),
              "cudaMemcpyAsync (to host)");
    CheckCuda(cudaStreamSynchronize(copies()), "cudaStreamSynchronize (to host)");
  }
  // The pinned bytes at `offset` are not reused before the ring wraps, which
  // first waits for the compute stream (StagingRing::Begin).
  void DoStage(void* ring, uint64_t offset, const void* src, uint64_t bytes) override {
    CHECK(ring == staging_ && pinned_ != nullptr);
    char* pinned = pinned_ + offset;
    std::memcpy(pinned, src, bytes);
    CheckCuda(cudaMemcpyAsync(staging_ + offset, pinned, bytes, cudaMemcpyHostToDevice,
                              compute()),
              "cudaMemcpyAsync (staging)");
  }
  void DoFillZero(void* base, uint64_t offset, uint64_t bytes) override {
    CheckCuda(cudaMemsetAsync(static_cast<char*>(base) + offset, 0, bytes, compute()),
              "cudaMemsetAsync");
  }
  void DoCopy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
              uint64_t bytes) override {
    CheckCuda(cudaMemcpyAsync(static_cast<char*>(dst) + dst_offset,
                              static_cast<const char*>(src) + src_offset, bytes,
                              cudaMemcpyDeviceToDevice, compute()),
              "cudaMemcpyAsync (device to device)");
  }
};

}  // namespace

Expected<std::unique_ptr<CudaDevice>> CudaDevice::Create(int device_index) {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "no device";
    cudaGetLastError();  // clear the sticky error so a later probe starts clean
    return Status::Error("cuda: no CUDA device found (" + why + ")");
  }
  if (device_index < 0 || device_index >= count) {
    return Status::Error("cuda: --device " + std::to_string(device_index) + " out of range (" +
                         std::to_string(count) + " CUDA devices)");
  }
  cudaDeviceProp prop{};
  if (const cudaError_t err = cudaGetDeviceProperties(&prop, device_index); err != cudaSuccess) {
    return Status::Error(std::string("cuda: cannot query device: ") + cudaGetErrorString(err));
  }
  if (prop.major < 8) {
    return Status::Error("cuda: " + std::string(prop.name) + " is sm_" +
                         std::to_string(prop.major) + std::to_string(prop.minor) +
                         "; this build targets sm_80 and newer");
  }
  std::unique_ptr<CudaDevice> d(new CudaMemory());
  d->device_.index = device_index;
  d->device_.name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                    std::to_string(prop.minor) + ")";
  d->device_.global_memory = prop.totalGlobalMem;
  d->device_.sm_major = prop.major;
  d->device_.sm_minor = prop.minor;
  d->Bind();
  CheckCuda(cudaStreamCreateWithFlags(&d->compute_, cudaStreamNonBlocking), "cudaStreamCreate");
  CheckCuda(cudaStreamCreateWithFlags(&d->copies_, cudaStreamNonBlocking), "cudaStreamCreate");
  CheckCuda(cudaEventCreateWithFlags(&d->compute_done_, cudaEventDisableTiming), "cudaEventCreate");
  CheckCublas(cublasCreate(&d->blas_), "cublasCreate");
  CheckCublas(cublasSetStream(d->blas_, d->compute_), "cublasSetStream");
  // Plain f32 arithmetic (no TF32 tensor cores): results are compared with the CPU.
  CheckCublas(cublasSetMathMode(d->blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  return d;
}

CudaDevice::~CudaDevice() {
  if (pinned_ != nullptr) {
    cudaStreamSynchronize(compute_);
    cudaFreeHost(pinned_);
  }
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (copies_ != nullptr) cudaStreamDestroy(copies_);
  if (compute_ != nullptr) cudaStreamDestroy(compute_);
}

void CudaDevice::Bind() const {
  thread_local int current = -1;  // the device this thread last made current here
  if (current == device_.index) return;
  CheckCuda(cudaSetDevice(device_.index), "cudaSetDevice");
  current = device_.index;
}

}  // namespace anymoe::cuda
