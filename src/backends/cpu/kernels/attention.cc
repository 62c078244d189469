// Compiled once per Highway target; see dot.cc for the dispatch pattern.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "core/dtype.h"
#include "core/half.h"
#include "backends/cpu/kernels/attention.h"

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
void Scale(float c, float* acc, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const auto vc = hn::Set(d, c);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(vc, hn::LoadU(d, acc + i)), d, acc + i);
  for (; i < n; ++i) acc[i] *= c;
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

// out[j] = sum of the lanes of s_j. On x86 the four reductions share their
// shuffles (two interleave-add steps leave each 128-bit block holding its
// part of all four sums, then the blocks are added); elsewhere one each.
template <class D, class V>
HWY_INLINE void SumOfLanes4(D d, V s0, V s1, V s2, V s3, float out[4]) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  const hn::Repartition<uint64_t, D> du64;
  const V a = hn::Add(hn::InterleaveLower(d, s0, s1), hn::InterleaveUpper(d, s0, s1));
  const V b = hn::Add(hn::InterleaveLower(d, s2, s3), hn::InterleaveUpper(d, s2, s3));
  const auto a64 = hn::BitCast(du64, a), b64 = hn::BitCast(du64, b);
  const V c = hn::Add(hn::BitCast(d, hn::InterleaveLower(du64, a64, b64)),
                      hn::BitCast(d, hn::InterleaveUpper(du64, a64, b64)));
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

// One block of nb keys (key(j0 .. j0 + nb)) into one query's running softmax:
// its scores, exponentiated against the new running max, the output and
// denominator rescaled when the max moved, then the block's weighted values.
template <typename T>
HWY_INLINE void OnlineBlock(const float* q, const T* k, const T* v, const int32_t* key_ids,
                            int64_t j0, int64_t nb, int64_t k_stride, int64_t v_stride,
                            int64_t d_k, int64_t d_v, float scale, float* scores,
                            float& running_max, float& denom, float* o) {
  BlockScores(q, k, key_ids, j0, nb, k_stride, d_k, scale, scores);
  const float block_max = *std::max_element(scores, scores + nb);
  const float new_max = std::max(block_max, running_max);
  const float block_sum = ExpShifted(scores, nb, new_max);
  if (new_max != running_max && denom > 0.0f) {
    const float c = std::exp(running_max - new_max);
    denom *= c;
    Scale(c, o, d_v);
  }
  denom += block_sum;
  running_max = new_max;
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

// Online softmax over blocks of keys: the scores of a block are taken first,
// exponentiated together (vectorised), and the accumulator is rescaled once
// per block rather than once per key. The queries take each block in turn
// while its keys and values are still in cache: the group of a kv head reads
// each of its key and value rows from memory once, and with several kv heads
// a block's whole rows (every head's slice) are read together, front to back,
// instead of one head's slice of every row per pass. Each query's arithmetic
// is the same whichever way its heads are gathered into calls.
// With `maxes` and `denoms` the outputs are left unnormalised and each query's
// running max and denominator are stored there instead (one segment of a
// longer key range, merged by MergeSegmentsImpl).
template <typename T>
void AttendOnlineSoftmax(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                         const T* k, const T* v, int64_t n_keys, const int32_t* key_ids,
                         int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v, float scale,
                         float* out, int64_t out_stride, float* maxes, float* denoms) {
  constexpr int64_t kBlock = 64, kMaxQueries = 64, kTouchBytes = 512 << 10;
  const int64_t n_q = kv_heads * group;
  for (int64_t g0 = 0; g0 < n_q; g0 += kMaxQueries) {
    const int64_t chunk = std::min(kMaxQueries, n_q - g0);
    HWY_ALIGN float scores[kBlock];
    float running_max[kMaxQueries], denom[kMaxQueries];
    StartQueries(chunk, d_v, out + g0 * out_stride, out_stride, running_max, denom);
    // The chunk's kv heads: rows are touched in order when there are several
    // and a block of them fits in L2 with room to spare.
    const int64_t first_head = g0 / group, heads = (g0 + chunk - 1) / group - first_head + 1;
    const bool touch =
        heads > 1 && kBlock * heads * (d_k + d_v) * int64_t(sizeof(T)) <= kTouchBytes;
    for (int64_t j0 = 0; j0 < n_keys; j0 += kBlock) {
      const int64_t nb = std::min(kBlock, n_keys - j0);
      if (touch) {
        TouchRows(k + first_head * d_k, key_ids, j0, nb, k_stride, heads * d_k);
        TouchRows(v + first_head * d_v, key_ids, j0, nb, v_stride, heads * d_v);
      }
      for (int64_t g = 0; g < chunk; ++g) {
        const int64_t head = (g0 + g) / group;
        OnlineBlock(q + (g0 + g) * q_stride, k + head * d_k, v + head * d_v, key_ids, j0, nb,
                    k_stride, v_stride, d_k, d_v, scale, scores, running_max[g], denom[g],
                    out + (g0 + g) * out_stride);
      }
    }
    FinishQueries(chunk, d_v, out + g0 * out_stride, out_stride, running_max, denom,
                  maxes != nullptr ? maxes + g0 : nullptr, denoms != nullptr ? denoms + g0 : nullptr);
  }
}

// HWY_EXPORT takes plain functions: the two instantiations, one per element
// type of the cached rows.
void AttendF32Impl(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const float* k, const float* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v, float scale,
                   float* out, int64_t out_stride, float* maxes, float* denoms) {
  AttendOnlineSoftmax(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, k_stride, v_stride, d_k,
                      d_v, scale, out, out_stride, maxes, denoms);
}

void AttendF16Impl(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const F16* k, const F16* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v, float scale,
                   float* out, int64_t out_stride, float* maxes, float* denoms) {
  AttendOnlineSoftmax(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, k_stride, v_stride, d_k,
                      d_v, scale, out, out_stride, maxes, denoms);
}

// AttendOnlineSoftmax over a cache of q8_0 / q4_0 rows (`type`; k and v at row
// 0's first kv head, strides in bytes): per block of keys, each kv head's key
// and value slices are dequantised into f32 tiles (exact: an f16 scale times
// a small integer), which the head's queries then attend as contiguous f32
// rows, so each query gets the bits of an f32 cache holding those values.
void AttendQuantizedImpl(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                         int32_t type, const uint8_t* k, const uint8_t* v, int64_t n_keys,
                         const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                         int64_t d_v, float scale, float* out, int64_t out_stride, float* maxes,
                         float* denoms) {
  constexpr int64_t kBlock = 64, kMaxQueries = 64;
  CHECK(d_k <= kMaxQuantizedHeadDim && d_v <= kMaxQuantizedHeadDim);
  const DType dtype = static_cast<DType>(type);
  const int64_t k_head_bytes = int64_t(BytesFor(dtype, uint64_t(d_k)).value());
  const int64_t v_head_bytes = int64_t(BytesFor(dtype, uint64_t(d_v)).value());
  HWY_ALIGN float tile_k[kBlock * kMaxQuantizedHeadDim], tile_v[kBlock * kMaxQuantizedHeadDim];
  const int64_t n_q = kv_heads * group;
  for (int64_t g0 = 0; g0 < n_q; g0 += kMaxQueries) {
    const int64_t chunk = std::min(kMaxQueries, n_q - g0);
    HWY_ALIGN float scores[kBlock];
    float running_max[kMaxQueries], denom[kMaxQueries];
    StartQueries(chunk, d_v, out + g0 * out_stride, out_stride, running_max, denom);
    for (int64_t j0 = 0; j0 < n_keys; j0 += kBlock) {
      const int64_t nb = std::min(kBlock, n_keys - j0);
      int64_t tile_head = -1;
      for (int64_t g = 0; g < chunk; ++g) {
        const int64_t head = (g0 + g) / group;
        if (head != tile_head) {
          for (int64_t b = 0; b < nb; ++b) {
            const int64_t row = key_ids != nullptr ? int64_t(key_ids[j0 + b]) : j0 + b;
            DequantizeRow(dtype, k + row * k_stride + head * k_head_bytes, tile_k + b * d_k, d_k);
            DequantizeRow(dtype, v + row * v_stride + head * v_head_bytes, tile_v + b * d_v, d_v);
          }
          tile_head = head;
        }
        OnlineBlock(q + (g0 + g) * q_stride, tile_k, tile_v, nullptr, 0, nb, d_k, d_v, d_k, d_v,
                    scale, scores, running_max[g], denom[g], out + (g0 + g) * out_stride);
      }
    }
    FinishQueries(chunk, d_v, out + g0 * out_stride, out_stride, running_max, denom,
                  maxes != nullptr ? maxes + g0 : nullptr, denoms != nullptr ? denoms + g0 : nullptr);
  }
}

// out[q] = the softmax-weighted values over every segment, from segment s's
// unnormalised outputs parts + s * part_stride + q * d_v and its maxes and
// denominators at s * n_q + q: rescaled to the largest max and summed in
// segment order.
void MergeSegmentsImpl(const float* parts, int64_t part_stride, const float* maxes,
                       const float* denoms, int64_t segments, int64_t n_q, int64_t d_v,
                       float* out, int64_t out_stride) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  for (int64_t i = 0; i < n_q; ++i) {
    float m = -INFINITY;
    for (int64_t s = 0; s < segments; ++s) m = std::max(m, maxes[s * n_q + i]);
    float* o = out + i * out_stride;
    std::fill_n(o, d_v, 0.0f);
    float denom = 0.0f;
    for (int64_t s = 0; s < segments; ++s) {
      const float c = std::exp(maxes[s * n_q + i] - m);
      denom += c * denoms[s * n_q + i];
      const float* part = parts + s * part_stride + i * d_v;
      const auto vc = hn::Set(d, c);
      int64_t x = 0;
      for (; x + lanes <= d_v; x += lanes) {
        hn::StoreU(hn::MulAdd(vc, hn::LoadU(d, part + x), hn::LoadU(d, o + x)), d, o + x);
      }
      for (; x < d_v; ++x) o[x] += c * part[x];
    }
    Scale(1.0f / denom, o, d_v);
  }
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
#include "core/check.h"

namespace anymoe::kernels {

HWY_EXPORT(AttendF32Impl);
HWY_EXPORT(AttendF16Impl);
HWY_EXPORT(AttendQuantizedImpl);
HWY_EXPORT(MergeSegmentsImpl);
HWY_EXPORT(SiluMulImpl);

namespace {

// The kernel for the cached rows' element type T (float or f16 bits), with
// AttendF32Impl's arguments.
template <typename T, typename... Args>
void Attend(Args... args) {
  if constexpr (std::is_same_v<T, float>) {
    HWY_DYNAMIC_DISPATCH(AttendF32Impl)(args...);
  } else {
    HWY_DYNAMIC_DISPATCH(AttendF16Impl)(args...);
  }
}

// Narrows a key range to segment `segment`: its key ids, or its first rows
// (strides in units of T); returns its key count.
template <typename T>
int64_t SegmentKeys(int64_t segment, int64_t n_keys, const int32_t*& key_ids, const T*& k,
                    const T*& v, int64_t k_stride, int64_t v_stride) {
  const int64_t j0 = segment * kAttentionSegmentKeys;
  const int64_t n = std::min(kAttentionSegmentKeys, n_keys - j0);
  CHECK(n > 0);
  if (key_ids != nullptr) {
    key_ids += j0;
  } else {
    k += j0 * k_stride;
    v += j0 * v_stride;
  }
  return n;
}

template <typename T>
void Segment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride, const T* k,
             const T* v, int64_t n_keys, const int32_t* key_ids, int64_t segment,
             int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v, float scale,
             float* part, float* maxes, float* denoms) {
  const int64_t n = SegmentKeys(segment, n_keys, key_ids, k, v, k_stride, v_stride);
  Attend<T>(q, kv_heads, group, q_stride, k, v, n, key_ids, k_stride, v_stride, d_k, d_v, scale,
            part, d_v, maxes, denoms);
}

}  // namespace

void AttendOnlineSoftmax(const float* q, const float* k, const float* v, int64_t n_keys,
                         const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                         int64_t d_v, float scale, float* out) {
  AttendOnlineSoftmaxHeads(q, 1, 1, d_k, k, v, n_keys, key_ids, k_stride, v_stride, d_k, d_v,
                           scale, out, d_v);
}

void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              const float* k, const float* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride) {
  Attend<float>(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, k_stride, v_stride, d_k, d_v,
                scale, out, out_stride, nullptr, nullptr);
}

void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              const uint16_t* k, const uint16_t* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride) {
  Attend<uint16_t>(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, k_stride, v_stride, d_k,
                   d_v, scale, out, out_stride, nullptr, nullptr);
}

void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const float* k, const float* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms) {
  Segment(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, segment, k_stride, v_stride, d_k,
          d_v, scale, part, maxes, denoms);
}

void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const uint16_t* k, const uint16_t* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms) {
  Segment(q, kv_heads, group, q_stride, k, v, n_keys, key_ids, segment, k_stride, v_stride, d_k,
          d_v, scale, part, maxes, denoms);
}

void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              DType type, const uint8_t* k, const uint8_t* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(AttendQuantizedImpl)
  (q, kv_heads, group, q_stride, int32_t(type), k, v, n_keys, key_ids, k_stride, v_stride, d_k,
   d_v, scale, out, out_stride, nullptr, nullptr);
}

void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride, DType type,
                   const uint8_t* k, const uint8_t* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms) {
  const int64_t n = SegmentKeys(segment, n_keys, key_ids, k, v, k_stride, v_stride);
  HWY_DYNAMIC_DISPATCH(AttendQuantizedImpl)
  (q, kv_heads, group, q_stride, int32_t(type), k, v, n, key_ids, k_stride, v_stride, d_k, d_v,
   scale, part, d_v, maxes, denoms);
}

void MergeSegments(const float* parts, int64_t part_stride, const float* maxes,
                   const float* denoms, int64_t segments, int64_t n_q, int64_t d_v, float* out,
                   int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(MergeSegmentsImpl)
  (parts, part_stride, maxes, denoms, segments, n_q, d_v, out, out_stride);
}

void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulImpl)(gate, up, out, n);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
