// The OpenCL objects one backend uses: a device chosen by index over all
// platforms, its context, one in-order queue, and the program built from the
// embedded kernel sources (kernels/*.cl) when the backend is created. As the
// device layer's DeviceRuntime: chunks are buffers (the only clCreateBuffer),
// regions are sub-buffers, transfers are blocking reads and writes.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/device/device_runtime.h"
#include "core/status.h"

namespace anymoe::opencl {

// Aborts with the op and OpenCL error code: on the hot path a failing enqueue
// is a device fault or a bug, never bad user input.
void CheckCl(cl_int err, const char* what);

struct DeviceDescription {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name;  // "platform name / device name"
  uint64_t global_memory = 0;
  uint64_t max_alloc = 0;
  uint32_t base_align = 0;  // bytes; sub-buffers start at multiples of it
};

// Every OpenCL device of every platform, in a stable order (--device N).
std::vector<DeviceDescription> ListDevices();

class ClRuntime final : public device::DeviceRuntime {
 public:
  static Expected<std::unique_ptr<ClRuntime>> Create(int device_index);
  ~ClRuntime() override;
  ClRuntime(const ClRuntime&) = delete;
  ClRuntime& operator=(const ClRuntime&) = delete;

  const DeviceDescription& device() const { return device_; }
  cl_command_queue queue() const { return queue_; }
  // The kernel of that name (created once at build time).
  cl_kernel kernel(const char* name) const;

  std::string device_name() const override { return device_.name; }
  uint64_t device_memory() const override { return device_.global_memory; }
  uint64_t available_memory() const override { return device_.global_memory; }
  uint64_t alignment() const override { return device_.base_align; }
  uint64_t max_chunk_bytes() const override { return device_.max_alloc; }
  Expected<void*> NewChunk(uint64_t bytes) override;
  void DeleteChunk(void* chunk) override;
  void* Region(void* chunk, uint64_t offset, uint64_t bytes) override;
  void ReleaseRegion(void* region) override;
  void Finish() override;

 private:
  ClRuntime() = default;
  Status Build();
  void DoWrite(void* base, uint64_t offset, const void* src, uint64_t bytes) override;
  void DoRead(const void* base, uint64_t offset, void* dst, uint64_t bytes) override;
  void DoStage(void* ring, uint64_t offset, const void* src, uint64_t bytes) override;
  void DoFillZero(void* base, uint64_t offset, uint64_t bytes) override;
  void DoCopy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
              uint64_t bytes) override;

  DeviceDescription device_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel> kernels_;
};

}  // namespace anymoe::opencl
