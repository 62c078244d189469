// Compiled once per Highway target; see dot.cc for the dispatch pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sum(x[i]^2) in double: each product of two floats is exact in double, so
// the only rounding is in the additions (four independent chains, instead of
// one serial chain that cost ~4 cycles per element).
double SumOfSquares(const float* x, int64_t n) {
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // half a vector of floats
  const int64_t lanes = int64_t(hn::Lanes(dd));
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  auto square_add = [&](int64_t i, auto acc) {
    const auto v = hn::PromoteTo(dd, hn::LoadU(df, x + i));
    return hn::MulAdd(v, v, acc);
  };
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    a0 = square_add(i, a0);
    a1 = square_add(i + lanes, a1);
    a2 = square_add(i + 2 * lanes, a2);
    a3 = square_add(i + 3 * lanes, a3);
  }
  for (; i + lanes <= n; i += lanes) a0 = square_add(i, a0);
  double sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
#else
  double sum = 0.0;
  int64_t i = 0;
#endif
  for (; i < n; ++i) sum += double(x[i]) * double(x[i]);
  return sum;
}

void RmsNormRowImpl(const float* x, const float* w, float eps, int64_t n, float* out) {
  const float inv = 1.0f / std::sqrt(float(SumOfSquares(x, n) / double(n)) + eps);
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vinv = hn::Set(d, inv);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vinv), hn::LoadU(d, w + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = (x[i] * inv) * w[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/norm.h"

namespace anymoe::kernels {

HWY_EXPORT(RmsNormRowImpl);

void RmsNormRow(const float* x, const float* w, float eps, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormRowImpl)(x, w, eps, n, out);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
