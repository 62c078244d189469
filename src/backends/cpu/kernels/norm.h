// Row normalisation on the CPU, vectorised: on a batched decode step's critical
// path (two RMSNorms per layer, run on one thread for a few rows).
#pragma once

#include <cstdint>

namespace anymoe::kernels {

// out[i] = (x[i] * inv) * w[i] with inv = 1 / sqrt(mean(x^2) + eps), for one
// row of n; the sum of squares is taken in double, as the reference's f32
// result needs no more. out may alias x.
void RmsNormRow(const float* x, const float* w, float eps, int64_t n, float* out);

}  // namespace anymoe::kernels
