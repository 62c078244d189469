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

// The device layer's runtime (its memory and copies) is ClRuntime's
// implementation in cl_runtime.cc; what the kernel launchers use is here.
class ClRuntime : public device::DeviceRuntime {
 public:
  static Expected<std::unique_ptr<ClRuntime>> Create(int device_index);
  ~ClRuntime() override;

  const DeviceDescription& device() const { return device_; }
  cl_command_queue queue() const { return queue_; }
  // The kernel of that name (created once at build time).
  cl_kernel kernel(const char* name) const;

 protected:
  ClRuntime() = default;
  Status Build();

  DeviceDescription device_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel> kernels_;
};

}  // namespace anymoe::opencl
