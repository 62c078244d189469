// Device helpers shared by the kernel files: weight decoding in the GGUF block
// layouts, and warp / block sums. Arithmetic is plain IEEE f32 (no fast math);
// kernels whose sums decide ties use __fadd_rn / __fmul_rn, which nvcc never
// contracts into an fma, to give the CPU backend's bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/kernels.h"

namespace anymoe::cuda::kernels {

constexpr int kWarp = 32;

__device__ __forceinline__ float HalfAt(const char* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

__device__ __forceinline__ float Bf16At(const char* p) {
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
}

// Bytes of one block of 32 weights (quantised types).
__device__ __forceinline__ int BlockBytes(int dtype) {
  return dtype == kQ8_0 ? 34 : (dtype == kQ4_0 ? 18 : 20);
}

// Element j of a weight row of the given dtype.
__device__ __forceinline__ float WeightAt(const char* row, int dtype, int j) {
  switch (dtype) {
    case kF32: return reinterpret_cast<const float*>(row)[j];
    case kF16: return HalfAt(row + 2 * j);
    case kBF16: return Bf16At(row + 2 * j);
    case kQ8_0: {
      const char* b = row + 34 * (j / 32);
      return HalfAt(b) * float(static_cast<int8_t>(b[2 + j % 32]));
    }
    case kQ4_0: {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(row + 18 * (j / 32));
      const int i = j % 32;
      const int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
      return HalfAt(reinterpret_cast<const char*>(b)) * float(q - 8);
    }
    case kQ4_1: {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(row + 20 * (j / 32));
      const int i = j % 32;
      const int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
      const char* c = reinterpret_cast<const char*>(b);
      return HalfAt(c) * float(q) + HalfAt(c + 2);
    }
  }
  return __int_as_float(0x7fc00000);  // NaN: an unsupported dtype reached a kernel
}

// Sum over the lanes of a warp; every lane gets the result.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the threads of a block (blockDim.x a multiple of 32, at most 1024);
// every thread gets the result. `red` holds 32 floats of shared memory.
__device__ __forceinline__ float BlockSum(float v, float* red) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = WarpSum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float total = lane < warps ? red[lane] : 0.0f;
  return WarpSum(total);
}

// Blocks to cover n items with `threads` per block.
inline unsigned Blocks(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace anymoe::cuda::kernels
