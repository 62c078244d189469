// y = x . W^T for any weight dtype on the CPU. f32 weights go straight to BLAS;
// other dtypes are dequantised a tile of rows at a time into per-thread scratch
// and multiplied there, so the weight is read once per call whatever T is.
#pragma once


#include "core/tensor.h"
#include "core/thread_pool.h"

namespace anymoe::cpu {

using ScratchFn = FunctionRef<float*(int thread, uint64_t floats)>;

void Matmul(ThreadPool& pool, ScratchFn scratch, const Tensor& x, const Tensor& w,
            const Tensor* bias, const Tensor& y);

}  // namespace anymoe::cpu
