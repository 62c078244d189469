// A q8_0 / q4_0 KV cache on the CPU backend: ScatterRows stores each new row
// as QuantizeRow's blocks, and attention over it gives exactly the bits of
// attention over an f32 cache holding the dequantised values (DequantizeRow),
// alone (few tokens: segments and heads over the threads) and in a batch (a
// task per token), over a long paged context with several kv heads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/attention.h"
#include "core/quantize_row.h"

namespace anymoe {
namespace {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class CpuQuantizedKv : public ::testing::TestWithParam<DType> {
 protected:
  CpuBackend backend_{2};
};

TEST_P(CpuQuantizedKv, AttendsLikeAnF32CacheOfTheDequantisedValues) {
  const DType type = GetParam();
  const int64_t t = 3, n_past = kernels::kAttentionSegmentKeys + 300, n_h = 6, n_kv = 3;
  const int64_t d_k = 64, d_v = 32, cap = n_past + 8;
  auto q = RandomFloats(size_t(t * n_h * d_k), 24);
  auto k = RandomFloats(size_t(cap * n_kv * d_k), 25, 0.5f);
  auto v = RandomFloats(size_t(cap * n_kv * d_v), 26);
  std::vector<int32_t> rows(static_cast<size_t>(cap));
  for (int64_t p = 0; p < cap; ++p) rows[size_t(p)] = int32_t((p * 37 + 7) % cap);  // a permutation
  const uint64_t k_row = BytesFor(type, uint64_t(n_kv * d_k)).value();
  const uint64_t v_row = BytesFor(type, uint64_t(n_kv * d_v)).value();
  std::vector<uint8_t> kq(size_t(cap) * k_row), vq(size_t(cap) * v_row);
  const Tensor ktq = Tensor::Of(kq.data(), type, {cap, n_kv, d_k});
  const Tensor vtq = Tensor::Of(vq.data(), type, {cap, n_kv, d_v});
  // Written through ScatterRows, as a step writes its new rows.
  backend_.ScatterRows(Tensor::Of(k.data(), DType::kF32, {cap, n_kv * d_k}), rows,
                       ktq.Reshaped({cap, n_kv * d_k}));
  backend_.ScatterRows(Tensor::Of(v.data(), DType::kF32, {cap, n_kv * d_v}), rows,
                       vtq.Reshaped({cap, n_kv * d_v}));
  std::vector<float> k32(k.size()), v32(v.size());
  std::vector<uint8_t> want(std::max(k_row, v_row));
  for (int64_t p = 0; p < cap; ++p) {
    const size_t r = size_t(rows[size_t(p)]);
    QuantizeRow(type, k.data() + p * n_kv * d_k, want.data(), n_kv * d_k);
    ASSERT_EQ(std::memcmp(want.data(), kq.data() + r * k_row, k_row), 0) << p;
    QuantizeRow(type, v.data() + p * n_kv * d_v, want.data(), n_kv * d_v);
    ASSERT_EQ(std::memcmp(want.data(), vq.data() + r * v_row, v_row), 0) << p;
    DequantizeRow(type, kq.data() + r * k_row, k32.data() + r * size_t(n_kv * d_k), n_kv * d_k);
    DequantizeRow(type, vq.data() + r * v_row, v32.data() + r * size_t(n_kv * d_v), n_kv * d_v);
  }
  const Tensor kt32 = Tensor::Of(k32.data(), DType::kF32, {cap, n_kv, d_k});
  const Tensor vt32 = Tensor::Of(v32.data(), DType::kF32, {cap, n_kv, d_v});
  const float scale = 0.125f;
  auto job = [&](const Tensor& kt, const Tensor& vt, std::vector<float>& out) {
    return AttentionJob{Tensor::Of(q.data(), DType::kF32, {t, n_h, d_k}), &kt, &vt, rows, n_past,
                        Tensor::Of(out.data(), DType::kF32, {t, n_h, d_v})};
  };
  std::vector<float> from_f32(size_t(t * n_h * d_v)), from_q(from_f32.size());
  const AttentionJob f32_job[] = {job(kt32, vt32, from_f32)};
  const AttentionJob q_job[] = {job(ktq, vtq, from_q)};
  backend_.MultiAttention(f32_job, scale);
  backend_.MultiAttention(q_job, scale);
  EXPECT_EQ(from_q, from_f32);

  std::vector<std::vector<float>> batched(4, std::vector<float>(from_q.size()));
  const AttentionJob four[] = {job(ktq, vtq, batched[0]), job(ktq, vtq, batched[1]),
                               job(ktq, vtq, batched[2]), job(ktq, vtq, batched[3])};
  backend_.MultiAttention(four, scale);
  for (const auto& out : batched) EXPECT_EQ(out, from_q);
}

INSTANTIATE_TEST_SUITE_P(Types, CpuQuantizedKv, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(Name(info.param)); });

}  // namespace
}  // namespace anymoe
