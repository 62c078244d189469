// The per-target f32 dot product that the kernel files share: include it after
// hwy/foreach_target.h (it is re-included once per target, like the .cc files).
#if defined(ANYMOE_KERNELS_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ANYMOE_KERNELS_DOT_INL_H_
#undef ANYMOE_KERNELS_DOT_INL_H_
#else
#define ANYMOE_KERNELS_DOT_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {

// sum_i a[i] * b[i]: two lane-parallel partial sums, a fixed-order reduction.
HWY_INLINE float Dot(const float* a, const float* b, size_t n) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    sum0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), sum0);
    sum1 = hn::MulAdd(hn::LoadU(d, a + i + lanes), hn::LoadU(d, b + i + lanes), sum1);
  }
  for (; i + lanes <= n; i += lanes) sum0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), sum0);
  float total = hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#endif  // ANYMOE_KERNELS_DOT_INL_H_ toggle
