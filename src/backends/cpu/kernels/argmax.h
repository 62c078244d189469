// The index of the largest of n floats, vectorised: greedy sampling takes it
// over the whole vocabulary for every sequence of every step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace anymoe::kernels {

// The lowest index i with x[i] the maximum (NaN never is one), or -1 when no
// value exceeds -inf (empty, all -inf or NaN).
int64_t ArgmaxF32(const float* x, size_t n);

}  // namespace anymoe::kernels
