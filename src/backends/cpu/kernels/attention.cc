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
#include "backends/cpu/kernels/attention_block-inl.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
  constexpr int64_t kBlock = kAttentionBlockKeys, kMaxQueries = 64, kTouchBytes = 512 << 10;
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
  constexpr int64_t kBlock = kAttentionBlockKeys, kMaxQueries = 64;
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
