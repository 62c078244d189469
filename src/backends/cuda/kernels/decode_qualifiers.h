// How the weight decoders (weight_decode.cuh) and their tables are declared:
// device functions and __constant__ tables under nvcc; plain inline functions
// and constexpr tables under the host compiler, which runs the same code in
// tests/backends/cuda_weight_decode_test.cc.
#pragma once

#ifdef __CUDACC__
#define ANYMOE_DECODE __device__ __forceinline__
#define ANYMOE_DECODE_TABLE __constant__ const
#else
#define ANYMOE_DECODE inline
#define ANYMOE_DECODE_TABLE inline constexpr
#endif
