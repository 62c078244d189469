// Error checks for CUDA runtime and cuBLAS calls. On the hot path a failing
// launch or copy is a device fault or a bug, never bad user input: abort with
// the call and the error, as the OpenCL backend's CheckCl does.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace anymoe::cuda {

void CheckCuda(cudaError_t err, const char* what);
void CheckCublas(cublasStatus_t status, const char* what);

}  // namespace anymoe::cuda
