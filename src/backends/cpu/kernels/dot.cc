// Compiled once per Highway target (foreach_target re-includes this file);
// HWY_DYNAMIC_DISPATCH picks the target at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/dot.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "backends/cpu/kernels/dot-inl.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float DotF32Impl(const float* a, const float* b, size_t n) { return Dot(a, b, n); }

void AxpyF32Impl(float s, const float* x, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::MulAdd(vs, hn::LoadU(d, x + i), hn::LoadU(d, out + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] += s * x[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/dot.h"

namespace anymoe::kernels {

HWY_EXPORT(DotF32Impl);
HWY_EXPORT(AxpyF32Impl);

float DotF32(const float* a, const float* b, size_t n) {
  return HWY_DYNAMIC_DISPATCH(DotF32Impl)(a, b, n);
}

void AxpyF32(float s, const float* x, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(AxpyF32Impl)(s, x, out, n);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
