// Sets a kernel's arguments in order and enqueues it: tensors become (cl_mem,
// element offset) pairs, matching the kernels' (global T* p, ulong p_off).
// Every enqueue is counted (DeviceRuntime::CountLaunch).
#pragma once

#include <initializer_list>

#include "backends/device/kernel_args.h"
#include "backends/opencl/cl_runtime.h"
#include "core/tensor.h"

namespace anymoe::opencl {

inline constexpr size_t kGroup = 64;  // WG in kernels/common.cl

class Launch {
 public:
  Launch(ClRuntime& rt, const char* name) : rt_(rt), kernel_(rt.kernel(name)), name_(name) {}

  // A tensor as (buffer, offset in elements of `elem_bytes`).
  Launch& T(const Tensor& t, uint64_t elem_bytes = 4) {
    CHECK(t.offset % elem_bytes == 0);
    return Mem(static_cast<cl_mem>(t.base), t.offset / elem_bytes);
  }
  Launch& Mem(cl_mem m, uint64_t elem_offset) {
    Arg(sizeof(cl_mem), &m);
    const cl_ulong off = elem_offset;
    return Arg(sizeof(off), &off);
  }
  // A buffer the kernel indexes itself (no offset argument).
  Launch& Buf(cl_mem m) { return Arg(sizeof(cl_mem), &m); }
  Launch& I(int64_t v) {
    const cl_int x = cl_int(v);
    CHECK(int64_t(x) == v);
    return Arg(sizeof(x), &x);
  }
  Launch& U(uint64_t v) {
    const cl_ulong x = v;
    return Arg(sizeof(x), &x);
  }
  Launch& F(float v) { return Arg(sizeof(v), &v); }
  // An FP8 weight's block scales as (grid buffer, its offset in floats,
  // block rows, block cols, grid columns, first row); without scales `unread`
  // stands in for the grid and block cols is 0.
  Launch& Scales(const device::WeightScales& s, const Tensor& unread) {
    if (s.buffer == nullptr) {
      Mem(static_cast<cl_mem>(unread.base), 0);
    } else {
      Mem(static_cast<cl_mem>(s.buffer), s.grid_offset / sizeof(float));
    }
    return I(s.block_rows).I(s.block_cols).I(s.grid_cols).I(s.first_row);
  }

  // Enqueues over `global` work-items (up to 3 dims), in groups of `local` when given.
  void Run(std::initializer_list<size_t> global, std::initializer_list<size_t> local = {}) {
    for (size_t g : global) {
      if (g == 0) return;  // nothing to do
    }
    rt_.CountLaunch();
    CheckCl(clEnqueueNDRangeKernel(rt_.queue(), kernel_, cl_uint(global.size()), nullptr,
                                   global.begin(), local.size() ? local.begin() : nullptr, 0,
                                   nullptr, nullptr),
            name_);
  }

 private:
  Launch& Arg(size_t size, const void* value) {
    CheckCl(clSetKernelArg(kernel_, index_++, size, value), name_);
    return *this;
  }
  ClRuntime& rt_;
  cl_kernel kernel_;
  const char* name_;
  cl_uint index_ = 0;
};

}  // namespace anymoe::opencl
