#include "backends/opencl/cl_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "backends/opencl/kernel_source.h"

namespace anymoe::opencl {
namespace {

std::string DeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string PlatformName(cl_platform_id p) {
  size_t n = 0;
  clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, CL_PLATFORM_NAME, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

void CheckCl(cl_int err, const char* what) {
  if (err == CL_SUCCESS) return;
  std::fprintf(stderr, "anymoe: opencl: %s failed with error %d\n", what, int(err));
  std::abort();
}

std::vector<DeviceDescription> ListDevices() {
  std::vector<DeviceDescription> out;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr);
    for (cl_device_id d : devices) {
      DeviceDescription desc;
      desc.platform = p;
      desc.id = d;
      desc.name = PlatformName(p) + " / " + DeviceString(d, CL_DEVICE_NAME);
      cl_ulong mem = 0, max_alloc = 0;
      cl_uint align_bits = 0;
      clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, nullptr);
      clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc, nullptr);
      clGetDeviceInfo(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(align_bits), &align_bits, nullptr);
      desc.global_memory = mem;
      desc.max_alloc = max_alloc;
      desc.base_align = std::max<uint32_t>(align_bits / 8, 64);
      out.push_back(desc);
    }
  }
  return out;
}

namespace {

// ClRuntime as the device layer sees it: chunks are buffers (the only
// clCreateBuffer), regions sub-buffers, transfers blocking reads and writes on
// the one in-order queue.
class ClMemory final : public ClRuntime {
 public:
  std::string device_name() const override { return device_.name; }
  uint64_t device_memory() const override { return device_.global_memory; }
  uint64_t available_memory() const override { return device_.global_memory; }
  uint64_t alignment() const override { return device_.base_align; }
  uint64_t max_chunk_bytes() const override { return device_.max_alloc; }

  Expected<void*> NewChunk(uint64_t bytes) override {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
    if (err != CL_SUCCESS) {
      return Status::Error("opencl: cannot create a buffer of " + std::to_string(bytes) +
                           " bytes on " + device_.name + " (error " + std::to_string(err) + ")");
    }
    return static_cast<void*>(m);
  }
  void DeleteChunk(void* chunk) override { clReleaseMemObject(Mem(chunk)); }
  void* Region(void* chunk, uint64_t offset, uint64_t bytes) override {
    cl_buffer_region region{offset, bytes};
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateSubBuffer(Mem(chunk), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                 &region, &err);
    CheckCl(err, "clCreateSubBuffer");
    return m;
  }
  void ReleaseRegion(void* region) override { clReleaseMemObject(Mem(region)); }
  void Finish() override { CheckCl(clFinish(queue_), "clFinish"); }

 private:
  static cl_mem Mem(const void* p) { return static_cast<cl_mem>(const_cast<void*>(p)); }

  void DoWrite(void* base, uint64_t offset, const void* src, uint64_t bytes) override {
    CheckCl(clEnqueueWriteBuffer(queue_, Mem(base), CL_TRUE, offset, bytes, src, 0, nullptr,
                                 nullptr),
            "clEnqueueWriteBuffer");
  }
  void DoRead(const void* base, uint64_t offset, void* dst, uint64_t bytes) override {
    CheckCl(clEnqueueReadBuffer(queue_, Mem(base), CL_TRUE, offset, bytes, dst, 0, nullptr,
                                nullptr),
            "clEnqueueReadBuffer");
  }
  // The queue is in order and the write blocks, so the kernels after it see
  // the bytes and `src` may be reused at once.
  void DoStage(void* ring, uint64_t offset, const void* src, uint64_t bytes) override {
    CheckCl(clEnqueueWriteBuffer(queue_, Mem(ring), CL_TRUE, offset, bytes, src, 0, nullptr,
                                 nullptr),
            "clEnqueueWriteBuffer (staging)");
  }
  void DoFillZero(void* base, uint64_t offset, uint64_t bytes) override {
    const cl_uint zero = 0;
    CheckCl(clEnqueueFillBuffer(queue_, Mem(base), &zero, sizeof(zero), offset, bytes, 0,
                                nullptr, nullptr),
            "clEnqueueFillBuffer");
  }
  void DoCopy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
              uint64_t bytes) override {
    CheckCl(clEnqueueCopyBuffer(queue_, Mem(src), Mem(dst), src_offset, dst_offset, bytes, 0,
                                nullptr, nullptr),
            "clEnqueueCopyBuffer");
  }
};

}  // namespace

Expected<std::unique_ptr<ClRuntime>> ClRuntime::Create(int device_index) {
  const std::vector<DeviceDescription> devices = ListDevices();
  if (devices.empty()) {
    return Status::Error("opencl: no OpenCL device found (install an ICD, e.g. pocl-opencl-icd)");
  }
  if (device_index < 0 || device_index >= int(devices.size())) {
    return Status::Error("opencl: --device " + std::to_string(device_index) + " out of range (" +
                         std::to_string(devices.size()) + " devices)");
  }
  std::unique_ptr<ClRuntime> rt(new ClMemory());
  rt->device_ = devices[size_t(device_index)];
  cl_int err = CL_SUCCESS;
  rt->context_ = clCreateContext(nullptr, 1, &rt->device_.id, nullptr, nullptr, &err);
  if (err != CL_SUCCESS)
    return Status::Error("opencl: clCreateContext failed: " + std::to_string(err));
  rt->queue_ = clCreateCommandQueue(rt->context_, rt->device_.id, 0, &err);
  if (err != CL_SUCCESS)
    return Status::Error("opencl: clCreateCommandQueue failed: " + std::to_string(err));
  RETURN_IF_ERROR(rt->Build());
  return rt;
}

Status ClRuntime::Build() {
  const std::string_view src = OpenClKernelSource();
  const char* text = src.data();
  const size_t len = src.size();
  cl_int err = CL_SUCCESS;
  program_ = clCreateProgramWithSource(context_, 1, &text, &len, &err);
  if (err != CL_SUCCESS)
    return Status::Error("opencl: clCreateProgramWithSource: " + std::to_string(err));
  err = clBuildProgram(program_, 1, &device_.id, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(program_, device_.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(program_, device_.id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    return Status::Error("opencl: building the kernels failed (" + std::to_string(err) + "):\n" +
                         log);
  }
  cl_uint n = 0;
  clCreateKernelsInProgram(program_, 0, nullptr, &n);
  std::vector<cl_kernel> ks(n);
  clCreateKernelsInProgram(program_, n, ks.data(), nullptr);
  for (cl_kernel k : ks) {
    char name[128] = {};
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof(name) - 1, name, nullptr);
    kernels_[name] = k;
  }
  return Status::Ok();
}

cl_kernel ClRuntime::kernel(const char* name) const {
  const auto it = kernels_.find(name);
  if (it == kernels_.end()) {
    std::fprintf(stderr, "anymoe: opencl: no kernel '%s'\n", name);
    std::abort();
  }
  return it->second;
}

ClRuntime::~ClRuntime() {
  for (auto& [name, k] : kernels_) clReleaseKernel(k);
  if (program_) clReleaseProgram(program_);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

}  // namespace anymoe::opencl
