// Compiled once per Highway target; see dot.cc for the dispatch pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/argmax.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Each lane keeps its first maximum and where it was (strictly greater
// replaces, so a lane's earliest index wins a tie), in two sets of lanes for
// alternate vectors (two dependency chains); the lanes are merged by value,
// ties to the lowest index. Indices are int32: n < 2^31.
int64_t ArgmaxF32Impl(const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t lanes = hn::Lanes(df);
  auto best0 = hn::Set(df, -INFINITY), best1 = best0;
  auto id0 = hn::Set(di, -1), id1 = id0;
  auto ids = hn::Iota(di, 0);
  const auto step = hn::Set(di, int32_t(lanes)), step2 = hn::Add(step, step);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto v0 = hn::LoadU(df, x + i), v1 = hn::LoadU(df, x + i + lanes);
    const auto better0 = hn::Gt(v0, best0), better1 = hn::Gt(v1, best1);
    best0 = hn::IfThenElse(better0, v0, best0);
    best1 = hn::IfThenElse(better1, v1, best1);
    id0 = hn::IfThenElse(hn::RebindMask(di, better0), ids, id0);
    id1 = hn::IfThenElse(hn::RebindMask(di, better1), hn::Add(ids, step), id1);
    ids = hn::Add(ids, step2);
  }
  HWY_ALIGN float lane_best[2 * hn::MaxLanes(df)];
  HWY_ALIGN int32_t lane_id[2 * hn::MaxLanes(di)];
  hn::Store(best0, df, lane_best);
  hn::Store(best1, df, lane_best + lanes);
  hn::Store(id0, di, lane_id);
  hn::Store(id1, di, lane_id + lanes);
  int64_t id = -1;
  float value = -INFINITY;
  for (size_t l = 0; l < 2 * lanes; ++l) {
    if (lane_id[l] < 0) continue;
    if (lane_best[l] > value || (lane_best[l] == value && lane_id[l] < id)) {
      value = lane_best[l];
      id = lane_id[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > value) {
      value = x[i];
      id = int64_t(i);
    }
  }
  return id;
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/argmax.h"

namespace anymoe::kernels {

HWY_EXPORT(ArgmaxF32Impl);

int64_t ArgmaxF32(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(ArgmaxF32Impl)(x, n); }

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
