// Compiled once per Highway target; see dot.cc for the dispatch pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "core/half.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway's DemoteTo to f16 is exact only where the hardware converts (F16C
// on x86 AVX2 and up, Arm NEON and SVE); its emulation on the other targets
// truncates and saturates, so those convert one value at a time.
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSSE3 || \
    HWY_TARGET == HWY_SSE4
void F32ToF16RowImpl(const float* x, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = F32ToF16(x[i]);
}
#else
void F32ToF16RowImpl(const float* x, uint16_t* out, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t lanes = hn::Lanes(df);
  auto* h = reinterpret_cast<hwy::float16_t*>(out);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, x + i)), dh, h + i);
  for (; i < n; ++i) out[i] = F32ToF16(x[i]);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/convert.h"

namespace anymoe::kernels {

HWY_EXPORT(F32ToF16RowImpl);

void F32ToF16Row(const float* x, uint16_t* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16RowImpl)(x, out, n);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
