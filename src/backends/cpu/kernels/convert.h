// f32 -> IEEE f16 conversion of cached rows (an f16 KV cache), vectorised.
#pragma once

#include <cstddef>
#include <cstdint>

namespace anymoe::kernels {

// out[i] = the f16 bits of x[i], rounded to nearest even (as F32ToF16 in
// core/half.h: overflow to infinity, NaN kept, subnormals exact).
void F32ToF16Row(const float* x, uint16_t* out, size_t n);

}  // namespace anymoe::kernels
