// f32 dot products with Highway, dispatched once per call to the best SIMD
// target of the machine (AVX-512, AVX2, NEON, SVE, ... from one source).
#pragma once

#include <cstddef>

namespace anymoe::kernels {

// sum_i a[i] * b[i] in f32 (lane-parallel partial sums, then a fixed-order reduction).
float DotF32(const float* a, const float* b, size_t n);

// out[i] += s * x[i].
void AxpyF32(float s, const float* x, float* out, size_t n);

}  // namespace anymoe::kernels
