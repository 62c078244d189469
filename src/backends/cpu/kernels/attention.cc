// Compiled once per Highway target; see dot.cc for the dispatch pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "backends/cpu/kernels/dot-inl.h"

#include <algorithm>
#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc = acc * c
void Scale(float c, float* acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vc = hn::Set(d, c);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(vc, hn::LoadU(d, acc + i)), d, acc + i);
  for (; i < n; ++i) acc[i] *= c;
}

// acc += p * v
void Axpy(float p, const float* v, float* acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vp = hn::Set(d, p);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::MulAdd(vp, hn::LoadU(d, v + i), hn::LoadU(d, acc + i)), d, acc + i);
  }
  for (; i < n; ++i) acc[i] += p * v[i];
}

// scores[i] = exp(scores[i] - max); returns their sum.
float ExpShifted(float* scores, int64_t n, float max) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vmax = hn::Set(d, max);
  auto vsum = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, scores + i), vmax));
    hn::StoreU(e, d, scores + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n; ++i) sum += (scores[i] = std::exp(scores[i] - max));
  return sum;
}

// Online softmax over blocks of keys: the scores of a block are taken first,
// exponentiated together (vectorised), and the accumulator is rescaled once
// per block rather than once per key.
void AttendOnlineSoftmaxImpl(const float* q, const float* k, const float* v, int64_t n_keys,
                             const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                             int64_t d_k, int64_t d_v, float scale, float* out) {
  constexpr int64_t kBlock = 64;
  HWY_ALIGN float scores[kBlock];
  float running_max = -INFINITY, denom = 0.0f;
  for (int64_t i = 0; i < d_v; ++i) out[i] = 0.0f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, n_keys - j0);
    float block_max = -INFINITY;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t key = key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b;
      scores[b] = Dot(q, k + key * k_stride, size_t(d_k)) * scale;
      block_max = scores[b] > block_max ? scores[b] : block_max;
    }
    const float new_max = block_max > running_max ? block_max : running_max;
    const float block_sum = ExpShifted(scores, nb, new_max);
    if (new_max != running_max && denom > 0.0f) {
      const float c = std::exp(running_max - new_max);
      denom *= c;
      Scale(c, out, d_v);
    }
    denom += block_sum;
    running_max = new_max;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t key = key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b;
      Axpy(scores[b], v + key * v_stride, out, d_v);
    }
  }
  const float inv = 1.0f / denom;
  for (int64_t i = 0; i < d_v; ++i) out[i] *= inv;
}

void SiluMulImpl(const float* gate, const float* up, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto one = hn::Set(d, 1.0f);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto g = hn::LoadU(d, gate + i);
    const auto silu = hn::Div(g, hn::Add(one, hn::Exp(d, hn::Neg(g))));
    hn::StoreU(hn::Mul(silu, hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels/attention.h"

namespace anymoe::kernels {

HWY_EXPORT(AttendOnlineSoftmaxImpl);
HWY_EXPORT(SiluMulImpl);

void AttendOnlineSoftmax(const float* q, const float* k, const float* v, int64_t n_keys,
                         const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                         int64_t d_v, float scale, float* out) {
  HWY_DYNAMIC_DISPATCH(AttendOnlineSoftmaxImpl)
  (q, k, v, n_keys, key_ids, k_stride, v_stride, d_k, d_v, scale, out);
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulImpl)(gate, up, out, n);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
