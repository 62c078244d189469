// Device helpers shared by the kernel files: weight decoding (weight_decode.cuh),
// FP8 block-scale rows, and warp / block sums. Arithmetic is plain IEEE f32 (no
// fast math); kernels whose sums decide ties use __fadd_rn / __fmul_rn, which
// nvcc never contracts into an fma, to give the CPU backend's bits.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/weight_decode.cuh"

namespace anymoe::cuda::kernels {

constexpr int kWarp = 32;

// Bytes of one block of 32 weights (the matvec's q8_0 / q4_0 / q4_1 lanes).
__device__ __forceinline__ int BlockBytes(int dtype) {
  return dtype == kQ8_0 ? 34 : (dtype == kQ4_0 ? 18 : 20);
}

// Row r's block scales of an FP8 weight (unread when it has none).
__device__ __forceinline__ const float* ScaleRow(const Scales& s, int r) {
  return s.grid + int64_t((s.first_row + r) / s.block_rows) * s.grid_cols;
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
