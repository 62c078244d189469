// The per-target pieces of online-softmax attention that attention.cc (one
// query's pass over its keys) and attention_tiles.cc (a tile of queries per
// block of keys) share: a block's scores, its softmax update and its weighted
// values, each with one fixed order of arithmetic per query, so that a query's
// bits do not depend on which kernel or which tile computed it. Include after
// hwy/foreach_target.h (re-included once per target).
#if defined(ANYMOE_KERNELS_ATTENTION_BLOCK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ANYMOE_KERNELS_ATTENTION_BLOCK_INL_H_
#undef ANYMOE_KERNELS_ATTENTION_BLOCK_INL_H_
#else
#define ANYMOE_KERNELS_ATTENTION_BLOCK_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Cached rows hold f32 or IEEE f16 values (F16: the bits, as stored); both
// are read as f32, so the arithmetic that follows is the same for either.
using F16 = uint16_t;

template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadAsF32(D d, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(d, p);
  } else {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
}

template <typename T>
HWY_INLINE float AsF32(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return F16ToF32(x);
  }
}

// acc = acc * c
HWY_INLINE void Scale(float c, float* acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vc = hn::Set(d, c);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(vc, hn::LoadU(d, acc + i)), d, acc + i);
  for (; i < n; ++i) acc[i] *= c;
}

// scores[i] = exp(scores[i] - max); returns their sum.
HWY_INLINE float ExpShifted(float* scores, int64_t n, float max) {
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

#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
// The first two steps of SumOfLanes4 on x86: lane j of each 128-bit block holds
// that block's part of the sum of s_j.
template <class D, class V>
HWY_INLINE V BlockPartSums4(D d, V s0, V s1, V s2, V s3) {
  const hn::Repartition<uint64_t, D> du64;
  const V a = hn::Add(hn::InterleaveLower(d, s0, s1), hn::InterleaveUpper(d, s0, s1));
  const V b = hn::Add(hn::InterleaveLower(d, s2, s3), hn::InterleaveUpper(d, s2, s3));
  const auto a64 = hn::BitCast(du64, a), b64 = hn::BitCast(du64, b);
  return hn::Add(hn::BitCast(d, hn::InterleaveLower(du64, a64, b64)),
                 hn::BitCast(d, hn::InterleaveUpper(du64, a64, b64)));
}
#endif

// out[j] = sum of the lanes of s_j. On x86 the four reductions share their
// shuffles (two interleave-add steps leave each 128-bit block holding its
// part of all four sums, then the blocks are added); elsewhere one each.
template <class D, class V>
HWY_INLINE void SumOfLanes4(D d, V s0, V s1, V s2, V s3, float out[4]) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  const V c = BlockPartSums4(d, s0, s1, s2, s3);
  HWY_ALIGN float blocks[hn::MaxLanes(d)];
  hn::Store(c, d, blocks);
  const hn::Full128<float> d4;
  auto sum = hn::Load(d4, blocks);
  for (size_t i = 4; i < hn::Lanes(d); i += 4) sum = hn::Add(sum, hn::Load(d4, blocks + i));
  hn::StoreU(sum, d4, out);
#else
  out[0] = hn::GetLane(hn::SumOfLanes(d, s0));
  out[1] = hn::GetLane(hn::SumOfLanes(d, s1));
  out[2] = hn::GetLane(hn::SumOfLanes(d, s2));
  out[3] = hn::GetLane(hn::SumOfLanes(d, s3));
#endif
}

// out[j] = scale * q . k_j for four keys: their four reductions overlap
// instead of each waiting for the last, and each key's arithmetic is the same
// whichever of the four it is.
template <typename T>
HWY_INLINE void FourScores(const float* q, const T* k0, const T* k1, const T* k2, const T* k3,
                           int64_t d_k, float scale, float out[4]) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= d_k; i += lanes) {
    const auto qv = hn::LoadU(d, q + i);
    s0 = hn::MulAdd(qv, LoadAsF32(d, k0 + i), s0);
    s1 = hn::MulAdd(qv, LoadAsF32(d, k1 + i), s1);
    s2 = hn::MulAdd(qv, LoadAsF32(d, k2 + i), s2);
    s3 = hn::MulAdd(qv, LoadAsF32(d, k3 + i), s3);
  }
  float t[4];
  SumOfLanes4(d, s0, s1, s2, s3, t);
  // Explicit fused multiply-adds: left to the compiler, whether a * b + c is
  // contracted could differ between the f32 and f16 instantiations.
  for (; i < d_k; ++i) {
    t[0] = std::fma(q[i], AsF32(k0[i]), t[0]);
    t[1] = std::fma(q[i], AsF32(k1[i]), t[1]);
    t[2] = std::fma(q[i], AsF32(k2[i]), t[2]);
    t[3] = std::fma(q[i], AsF32(k3[i]), t[3]);
  }
  for (int j = 0; j < 4; ++j) out[j] = t[j] * scale;
}

// scores[b] = scale * q . k[key(b)] for b < n: four keys at a time, so that
// their four reductions overlap instead of each waiting for the last (a last
// group of 1-3 keys repeats its final key: a key's score never depends on
// where it falls in a group).
template <typename T>
HWY_INLINE void BlockScores(const float* q, const T* k, const int32_t* key_ids, int64_t j0,
                            int64_t n, int64_t k_stride, int64_t d_k, float scale, float* scores) {
  auto key_row = [&](int64_t b) {
    return k + (key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b) * k_stride;
  };
  int64_t b = 0;
  for (; b + 4 <= n; b += 4) {
    FourScores(q, key_row(b), key_row(b + 1), key_row(b + 2), key_row(b + 3), d_k, scale,
               scores + b);
  }
  if (b < n) {
    float t[4];
    const T* last = key_row(n - 1);
    FourScores(q, key_row(b), b + 1 < n ? key_row(b + 1) : last, b + 2 < n ? key_row(b + 2) : last,
               last, d_k, scale, t);
    std::copy(t, t + (n - b), scores + b);
  }
}

// First value column that BlockValues does not take four vectors at a time:
// the columns below it sum the even keys and the odd keys in two chains, the
// rest in one (BlockValuesTail).
HWY_INLINE int64_t PairedValueColumns(int64_t d_v) {
  const int64_t four = 4 * int64_t(hn::Lanes(hn::ScalableTag<float>()));
  return d_v / four * four;
}

// BlockValues for the columns [c0, d_v), c0 = PairedValueColumns(d_v): one
// chain per column over the keys in order.
template <typename T>
HWY_INLINE void BlockValuesTail(const float* p, const T* v, const int32_t* key_ids, int64_t j0,
                                int64_t n, int64_t v_stride, int64_t c0, int64_t d_v,
                                float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  auto value_row = [&](int64_t b) {
    return v + (key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b) * v_stride;
  };
  int64_t c = c0;
  for (; c + lanes <= d_v; c += lanes) {
    auto a = hn::LoadU(d, out + c);
    for (int64_t b = 0; b < n; ++b) {
      a = hn::MulAdd(hn::Set(d, p[b]), LoadAsF32(d, value_row(b) + c), a);
    }
    hn::StoreU(a, d, out + c);
  }
  for (; c < d_v; ++c) {
    for (int64_t b = 0; b < n; ++b) out[c] = std::fma(p[b], AsF32(value_row(b)[c]), out[c]);
  }
}

// out[0, d_v) += sum_b p[b] v[key(b)]: the output is held in registers, a
// slice of four vectors at a time, while the block's keys stream past (two
// keys per step, so the two accumulator sets hide the FMA latency).
template <typename T>
HWY_INLINE void BlockValues(const float* p, const T* v, const int32_t* key_ids, int64_t j0,
                            int64_t n, int64_t v_stride, int64_t d_v, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  auto value_row = [&](int64_t b) {
    return v + (key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b) * v_stride;
  };
  int64_t c = 0;
  for (; c + 4 * lanes <= d_v; c += 4 * lanes) {
    auto a0 = hn::LoadU(d, out + c), a1 = hn::LoadU(d, out + c + lanes);
    auto a2 = hn::LoadU(d, out + c + 2 * lanes), a3 = hn::LoadU(d, out + c + 3 * lanes);
    auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
    int64_t b = 0;
    for (; b + 2 <= n; b += 2) {
      const T* v0 = value_row(b) + c;
      const T* v1 = value_row(b + 1) + c;
      const auto p0 = hn::Set(d, p[b]), p1 = hn::Set(d, p[b + 1]);
      a0 = hn::MulAdd(p0, LoadAsF32(d, v0), a0);
      a1 = hn::MulAdd(p0, LoadAsF32(d, v0 + lanes), a1);
      a2 = hn::MulAdd(p0, LoadAsF32(d, v0 + 2 * lanes), a2);
      a3 = hn::MulAdd(p0, LoadAsF32(d, v0 + 3 * lanes), a3);
      b0 = hn::MulAdd(p1, LoadAsF32(d, v1), b0);
      b1 = hn::MulAdd(p1, LoadAsF32(d, v1 + lanes), b1);
      b2 = hn::MulAdd(p1, LoadAsF32(d, v1 + 2 * lanes), b2);
      b3 = hn::MulAdd(p1, LoadAsF32(d, v1 + 3 * lanes), b3);
    }
    if (b < n) {
      const T* v0 = value_row(b) + c;
      const auto p0 = hn::Set(d, p[b]);
      a0 = hn::MulAdd(p0, LoadAsF32(d, v0), a0);
      a1 = hn::MulAdd(p0, LoadAsF32(d, v0 + lanes), a1);
      a2 = hn::MulAdd(p0, LoadAsF32(d, v0 + 2 * lanes), a2);
      a3 = hn::MulAdd(p0, LoadAsF32(d, v0 + 3 * lanes), a3);
    }
    hn::StoreU(hn::Add(a0, b0), d, out + c);
    hn::StoreU(hn::Add(a1, b1), d, out + c + lanes);
    hn::StoreU(hn::Add(a2, b2), d, out + c + 2 * lanes);
    hn::StoreU(hn::Add(a3, b3), d, out + c + 3 * lanes);
  }
  BlockValuesTail(p, v, key_ids, j0, n, v_stride, c, d_v, out);
}

// Reads one word of every 64-byte line of values [0, span) of each row
// key(j0 .. j0 + n) at `base`, in row order. This machine's memory streams
// whole rows read front to back at ~3x the rate of one head's slice of each
// row per pass (SmolLM2's 768-byte rows, 256 per head, huge pages: 28-31
// against 9-10 GB/s on one core), and software prefetches of the same lines
// did not help; so a block's rows are first touched in order, after which
// the per-query passes find them in L1/L2.
template <typename T>
HWY_INLINE void TouchRows(const T* base, const int32_t* key_ids, int64_t j0, int64_t n,
                          int64_t stride, int64_t span) {
  const int64_t bytes = span * int64_t(sizeof(T));  // 4 or more: a head holds 2+ values
  uint32_t seen = 0;
  for (int64_t b = 0; b < n; ++b) {
    const auto* row = reinterpret_cast<const uint8_t*>(
        base + (key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b) * stride);
    auto load = [&](int64_t offset) {
      uint32_t word;
      std::memcpy(&word, row + offset, 4);
      seen |= word;
    };
    for (int64_t offset = 0; offset < bytes; offset += 64) load(offset);
    load(bytes - 4);  // the last line, when the row does not start on one
  }
  // Keep the loads: their values are not needed.
  asm volatile("" : : "r"(seen));
}

// The largest of scores[0, n), n >= 1 (exact, so its order does not matter).
HWY_INLINE float BlockMax(const float* scores, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  float m = scores[0];
  int64_t i = 0;
  if (n >= lanes) {
    auto vm = hn::LoadU(d, scores);
    for (i = lanes; i + lanes <= n; i += lanes) vm = hn::Max(vm, hn::LoadU(d, scores + i));
    m = hn::GetLane(hn::MaxOfLanes(d, vm));
  }
  for (; i < n; ++i) m = std::max(m, scores[i]);
  return m;
}

// One block's scores (n of them) into a query's running softmax: exponentiated
// against the new running max (in place: they become the block's weights), the
// output o[0, d_v) and the denominator rescaled when the max moved.
HWY_INLINE void SoftmaxUpdate(float* scores, int64_t n, int64_t d_v, float& running_max,
                              float& denom, float* o) {
  const float new_max = std::max(BlockMax(scores, n), running_max);
  const float block_sum = ExpShifted(scores, n, new_max);
  if (new_max != running_max && denom > 0.0f) {
    const float c = std::exp(running_max - new_max);
    denom *= c;
    Scale(c, o, d_v);
  }
  denom += block_sum;
  running_max = new_max;
}

// One block of nb keys (key(j0 .. j0 + nb)) into one query's running softmax:
// its scores, exponentiated against the new running max, the output and
// denominator rescaled when the max moved, then the block's weighted values.
template <typename T>
HWY_INLINE void OnlineBlock(const float* q, const T* k, const T* v, const int32_t* key_ids,
                            int64_t j0, int64_t nb, int64_t k_stride, int64_t v_stride,
                            int64_t d_k, int64_t d_v, float scale, float* scores,
                            float& running_max, float& denom, float* o) {
  BlockScores(q, k, key_ids, j0, nb, k_stride, d_k, scale, scores);
  SoftmaxUpdate(scores, nb, d_v, running_max, denom, o);
  BlockValues(scores, v, key_ids, j0, nb, v_stride, d_v, o);
}

// Zero outputs, running maxes of -inf and zero denominators for n queries.
HWY_INLINE void StartQueries(int64_t n, int64_t d_v, float* out, int64_t out_stride,
                             float* running_max, float* denom) {
  for (int64_t g = 0; g < n; ++g) {
    running_max[g] = -INFINITY;
    denom[g] = 0.0f;
    std::fill_n(out + g * out_stride, d_v, 0.0f);
  }
}

// Normalises n queries' outputs, or with `maxes` leaves them unnormalised and
// stores each running max and denominator (one segment of a longer range).
HWY_INLINE void FinishQueries(int64_t n, int64_t d_v, float* out, int64_t out_stride,
                              const float* running_max, const float* denom, float* maxes,
                              float* denoms) {
  for (int64_t g = 0; g < n; ++g) {
    if (maxes != nullptr) {
      maxes[g] = running_max[g];
      denoms[g] = denom[g];
    } else {
      Scale(1.0f / denom[g], out + g * out_stride, d_v);
    }
  }
}
}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#endif  // ANYMOE_KERNELS_ATTENTION_BLOCK_INL_H_
