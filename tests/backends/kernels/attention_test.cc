// Online-softmax attention and SiLU-gated product against double-precision
// two-pass references, on every compiled Highway target.
#include "backends/cpu/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "core/half.h"

namespace anymoe::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> u(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(AttendOnlineSoftmax, MatchesTwoPassReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    // 37 keys fit one block; 200 cross three, with the largest scores late.
    for (const int64_t keys : {37, 200}) {
      const int64_t d_k = 24, d_v = 20, k_stride = 40, v_stride = 33;
      const auto q = Random(d_k, 1, 1.0f), v = Random(keys * v_stride, 3, 1.0f);
      auto k = Random(keys * k_stride, 2, 1.0f);
      for (int64_t x = 0; x < k_stride; ++x) k[size_t((keys - 1) * k_stride + x)] *= 4.0f;
      const std::vector<int32_t> ids = {0, 3, 4, 10, 11, 12, 30, 36};
      for (const bool select : {false, true}) {
        const int64_t n = select ? int64_t(ids.size()) : keys;
        std::vector<float> out(static_cast<size_t>(d_v));
        AttendOnlineSoftmax(q.data(), k.data(), v.data(), n, select ? ids.data() : nullptr,
                            k_stride, v_stride, d_k, d_v, 0.7f, out.data());
        std::vector<double> s(static_cast<size_t>(n));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t key = select ? ids[size_t(j)] : j;
          double dot = 0;
          for (int64_t x = 0; x < d_k; ++x)
            dot += double(q[size_t(x)]) * k[size_t(key * k_stride + x)];
          s[size_t(j)] = 0.7 * dot;
          mx = std::max(mx, s[size_t(j)]);
        }
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t x = 0; x < d_v; ++x) {
          double ref = 0;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t key = select ? ids[size_t(j)] : j;
            ref += s[size_t(j)] / sum * v[size_t(key * v_stride + x)];
          }
          EXPECT_NEAR(out[size_t(x)], ref, 1e-5)
              << "keys=" << keys << " select=" << select << " dim " << x;
        }
      }
    }
  });
}

// softmax(scale q . k_j) v_j in double, two passes; keys `ids` or 0..n-1.
std::vector<double> ReferenceAttention(const float* q, const std::vector<float>& k,
                                       const std::vector<float>& v, int64_t n, const int32_t* ids,
                                       int64_t k_stride, int64_t v_stride, int64_t d_k,
                                       int64_t d_v, double scale) {
  std::vector<double> s(static_cast<size_t>(n)), out(static_cast<size_t>(d_v), 0.0);
  double mx = -1e300, sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t key = ids ? ids[j] : j;
    double dot = 0;
    for (int64_t x = 0; x < d_k; ++x) dot += double(q[x]) * k[size_t(key * k_stride + x)];
    s[size_t(j)] = scale * dot;
    mx = std::max(mx, s[size_t(j)]);
  }
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t key = ids ? ids[j] : j;
    for (int64_t x = 0; x < d_v; ++x) out[size_t(x)] += s[size_t(j)] / sum * v[size_t(key * v_stride + x)];
  }
  return out;
}

// Query i of kv_heads groups of `group` (at q + i * q_stride, its output at
// out + i * out_stride) against the reference over its kv head's vectors
// (head h at offset h * d_k / h * d_v of each row), scale 0.125.
void ExpectHeadsMatchReference(const std::vector<float>& q, int64_t q_stride,
                               const std::vector<float>& k, const std::vector<float>& v,
                               int64_t n, const int32_t* key_ids, int64_t kv_heads, int64_t group,
                               int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                               const std::vector<float>& out, int64_t out_stride) {
  for (int64_t i = 0; i < kv_heads * group; ++i) {
    const int64_t h = i / group;
    const auto ref = ReferenceAttention(q.data() + i * q_stride,
                                        std::vector<float>(k.begin() + h * d_k, k.end()),
                                        std::vector<float>(v.begin() + h * d_v, v.end()), n,
                                        key_ids, k_stride, v_stride, d_k, d_v, 0.125);
    for (int64_t x = 0; x < d_v; ++x) {
      EXPECT_NEAR(out[size_t(i * out_stride + x)], ref[size_t(x)], 1e-5)
          << "query " << i << " ids=" << (key_ids != nullptr) << " dim " << x;
    }
  }
}

// A GQA group: 67 queries (more than one pass of 64) share the keys and values,
// each with its own softmax, at strided positions.
TEST(AttendOnlineSoftmaxHeads, EachQueryOfAGroupMatchesItsReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    const int64_t keys = 150, d_k = 64, d_v = 48, k_stride = 70, v_stride = 50;
    const int64_t n_q = 67, q_stride = 67, out_stride = 53;
    const auto q = Random(n_q * q_stride, 7, 1.0f), k = Random(keys * k_stride, 8, 0.5f),
               v = Random(keys * v_stride, 9, 1.0f);
    std::vector<int32_t> ids;
    for (int32_t j = 0; j < keys; j += 2) ids.push_back(j);
    for (const bool select : {false, true}) {
      const int64_t n = select ? int64_t(ids.size()) : keys;
      const int32_t* key_ids = select ? ids.data() : nullptr;
      std::vector<float> out(size_t(n_q * out_stride), -7.0f);
      AttendOnlineSoftmaxHeads(q.data(), 1, n_q, q_stride, k.data(), v.data(), n, key_ids, k_stride,
                               v_stride, d_k, d_v, 0.125f, out.data(), out_stride);
      for (int64_t g = 0; g < n_q; ++g) {
        const auto ref = ReferenceAttention(q.data() + g * q_stride, k, v, n, key_ids, k_stride,
                                            v_stride, d_k, d_v, 0.125);
        for (int64_t x = 0; x < d_v; ++x) {
          EXPECT_NEAR(out[size_t(g * out_stride + x)], ref[size_t(x)], 1e-5)
              << "query " << g << " select=" << select << " dim " << x;
        }
        // Nothing between the outputs is touched.
        for (int64_t x = d_v; x < out_stride && g + 1 < n_q; ++x)
          EXPECT_EQ(out[size_t(g * out_stride + x)], -7.0f);
      }
    }
  });
}

// Every query head of a token in one call: 5 kv heads of 14 queries each (70
// queries: more than one chunk of 64, a chunk boundary inside a head), rows
// holding every head's keys side by side. Each query gets exactly the bits of
// the per-group call for its head (the CPU backend takes one or the other
// depending on the batch, and batching must not change results), and matches
// the reference.
TEST(AttendOnlineSoftmaxHeads, EachQueryHasItsPerGroupBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    const int64_t keys = 150, kv_heads = 5, group = 14, d_k = 32, d_v = 24;
    const int64_t k_stride = kv_heads * d_k + 3, v_stride = kv_heads * d_v + 5;
    const int64_t n_q = kv_heads * group, q_stride = d_k + 1, out_stride = d_v + 2;
    const auto q = Random(n_q * q_stride, 17, 1.0f), k = Random(keys * k_stride, 18, 0.5f),
               v = Random(keys * v_stride, 19, 1.0f);
    std::vector<int32_t> ids;
    for (int32_t j = keys - 1; j >= 0; j -= 3) ids.push_back(j);  // rows out of order
    for (const bool select : {false, true}) {
      const int64_t n = select ? int64_t(ids.size()) : keys;
      const int32_t* key_ids = select ? ids.data() : nullptr;
      std::vector<float> all(size_t(n_q * out_stride), -7.0f), per_group(all);
      AttendOnlineSoftmaxHeads(q.data(), kv_heads, group, q_stride, k.data(), v.data(), n, key_ids,
                               k_stride, v_stride, d_k, d_v, 0.125f, all.data(), out_stride);
      for (int64_t h = 0; h < kv_heads; ++h) {
        AttendOnlineSoftmaxHeads(q.data() + h * group * q_stride, 1, group, q_stride,
                                 k.data() + h * d_k, v.data() + h * d_v, n, key_ids, k_stride,
                                 v_stride, d_k, d_v, 0.125f,
                                 per_group.data() + h * group * out_stride, out_stride);
      }
      EXPECT_EQ(all, per_group) << "select=" << select;
      ExpectHeadsMatchReference(q, q_stride, k, v, n, key_ids, kv_heads, group, k_stride,
                                v_stride, d_k, d_v, all, out_stride);
    }
  });
}

// A range of 3 segments (the last partial) attended segment by segment and
// merged matches the reference, with keys in order and through a row table.
TEST(AttendSegment, MergedSegmentsMatchTheReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    const int64_t keys = 2 * kAttentionSegmentKeys + 77, kv_heads = 2, group = 3, d_k = 24;
    const int64_t d_v = 20, k_stride = kv_heads * d_k, v_stride = kv_heads * d_v;
    const int64_t n_q = kv_heads * group;
    const auto q = Random(n_q * d_k, 21, 1.0f), k = Random(keys * k_stride, 22, 0.5f),
               v = Random(keys * v_stride, 23, 1.0f);
    std::vector<int32_t> ids(static_cast<size_t>(keys));
    for (int64_t j = 0; j < keys; ++j) ids[size_t(j)] = int32_t((j * 31 + 5) % keys);
    for (const bool select : {false, true}) {
      const int32_t* key_ids = select ? ids.data() : nullptr;
      const int64_t segments = AttentionSegments(keys);
      ASSERT_EQ(segments, 3);
      std::vector<float> parts(size_t(segments * n_q * d_v)), maxes(size_t(segments * n_q)),
          denoms(maxes.size()), out(size_t(n_q * d_v));
      for (int64_t s = 0; s < segments; ++s) {
        AttendSegment(q.data(), kv_heads, group, d_k, k.data(), v.data(), keys, key_ids, s,
                      k_stride, v_stride, d_k, d_v, 0.125f, parts.data() + s * n_q * d_v,
                      maxes.data() + s * n_q, denoms.data() + s * n_q);
      }
      MergeSegments(parts.data(), n_q * d_v, maxes.data(), denoms.data(), segments, n_q, d_v,
                    out.data(), d_v);
      ExpectHeadsMatchReference(q, d_k, k, v, keys, key_ids, kv_heads, group, k_stride, v_stride,
                                d_k, d_v, out, d_v);
    }
  });
}

// Rows cached as f16: `values` rounded to f16 (the stored bits) and the f32
// values those bits stand for.
struct F16Rows {
  std::vector<uint16_t> bits;
  std::vector<float> values;
  explicit F16Rows(const std::vector<float>& x) {
    for (float v : x) {
      bits.push_back(F32ToF16(v));
      values.push_back(F16ToF32(bits.back()));
    }
  }
};

// An f16 cache gives every query exactly the bits of an f32 cache holding the
// same (rounded) values: whole calls and segments, keys in order and through
// a row table, 3 kv heads of 3 queries, a head dim (36) off the vector width,
// key counts off the groups of 4, and subnormal f16 values among the keys.
TEST(AttendOnlineSoftmaxHeads, F16RowsGiveTheBitsOfTheirF32ValuesOnEveryTarget) {
  testing::ForEachTarget([] {
    const int64_t keys = kAttentionSegmentKeys + 83, kv_heads = 3, group = 3, d_k = 36, d_v = 36;
    const int64_t k_stride = kv_heads * d_k, v_stride = kv_heads * d_v, n_q = kv_heads * group;
    auto k_raw = Random(keys * k_stride, 31, 0.5f);
    for (size_t i = 0; i < k_raw.size(); i += 7) k_raw[i] = 3e-6f;  // subnormal in f16
    const F16Rows k(k_raw), v(Random(keys * v_stride, 32, 1.0f));
    const auto q = Random(n_q * d_k, 33, 1.0f);
    std::vector<int32_t> ids(static_cast<size_t>(keys));
    for (int64_t j = 0; j < keys; ++j) ids[size_t(j)] = int32_t((j * 29 + 3) % keys);
    for (const bool select : {false, true}) {
      const int32_t* key_ids = select ? ids.data() : nullptr;
      for (const int64_t n : {int64_t(7), int64_t(130), keys}) {
        std::vector<float> from_f16(size_t(n_q * d_v)), from_f32(from_f16.size());
        AttendOnlineSoftmaxHeads(q.data(), kv_heads, group, d_k, k.bits.data(), v.bits.data(), n,
                                 key_ids, k_stride, v_stride, d_k, d_v, 0.125f, from_f16.data(),
                                 d_v);
        AttendOnlineSoftmaxHeads(q.data(), kv_heads, group, d_k, k.values.data(),
                                 v.values.data(), n, key_ids, k_stride, v_stride, d_k, d_v, 0.125f,
                                 from_f32.data(), d_v);
        EXPECT_EQ(from_f16, from_f32) << "n=" << n << " select=" << select;
        if (!select) {
          ExpectHeadsMatchReference(q, d_k, k.values, v.values, n, nullptr, kv_heads, group,
                                    k_stride, v_stride, d_k, d_v, from_f16, d_v);
        }
      }
      for (int64_t segment = 0; segment < AttentionSegments(keys); ++segment) {
        std::vector<float> parts16(size_t(n_q * d_v)), parts32(parts16.size());
        std::vector<float> m16(static_cast<size_t>(n_q)), m32(m16), s16(m16), s32(m16);
        AttendSegment(q.data(), kv_heads, group, d_k, k.bits.data(), v.bits.data(), keys, key_ids,
                      segment, k_stride, v_stride, d_k, d_v, 0.125f, parts16.data(), m16.data(),
                      s16.data());
        AttendSegment(q.data(), kv_heads, group, d_k, k.values.data(), v.values.data(), keys,
                      key_ids, segment, k_stride, v_stride, d_k, d_v, 0.125f, parts32.data(),
                      m32.data(), s32.data());
        EXPECT_EQ(parts16, parts32) << "segment " << segment;
        EXPECT_EQ(m16, m32);
        EXPECT_EQ(s16, s32);
      }
    }
  });
}

TEST(SiluMul, MatchesReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    for (size_t n : {1u, 15u, 16u, 17u, 100u}) {
      const auto g = Random(n, 4, 4.0f), u = Random(n, 5, 1.0f);
      std::vector<float> out(n);
      SiluMul(g.data(), u.data(), out.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const double ref = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
        EXPECT_NEAR(out[i], ref, 2e-6 * (1 + std::fabs(ref))) << i;
      }
    }
  });
}

}  // namespace
}  // namespace anymoe::kernels
