// The OpenCL C sources of kernels/*.cl, concatenated (common.cl first) and
// embedded at build time by embed_kernels.cmake; compiled when a backend starts.
#pragma once

#include <string_view>

namespace anymoe::opencl {

std::string_view OpenClKernelSource();

}  // namespace anymoe::opencl
