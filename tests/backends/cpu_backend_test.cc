// CPU backend ops against straightforward double-precision references on random
// data: matmul for every weight dtype (with and without bias, T = 1 and > 1,
// row counts that do not fill a tile; a row's bits in any batch, on every CPU
// target), GQA attention over a partly filled cache, RMSNorm, SwiGLU and
// embedding lookup.
#include "backends/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "backends/cpu/row_ops.h"
#include "backends/kernels/random_weights.h"
#include "core/half.h"
#include "formats/tensor_source.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Random bytes for `rows` rows of `cols` elements of `t`: normal floats for
// f32 / f16 / bf16, and for the quantised types the kernel tests' valid random
// blocks (small finite scales).
std::vector<uint8_t> RandomWeightBytes(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  if (Info(t).quantized) return kernels::RandomWeights(t, rows, cols, seed);
  const uint64_t bytes = BytesFor(t, uint64_t(rows * cols)).value();
  std::vector<uint8_t> b(bytes);
  const auto f = RandomFloats(size_t(rows * cols), seed);
  for (size_t i = 0; i < f.size(); ++i) {
    if (t == DType::kF32) std::memcpy(&b[i * 4], &f[i], 4);
    uint16_t h = t == DType::kF16 ? F32ToF16(f[i]) : F32ToBF16(f[i]);
    if (t != DType::kF32) std::memcpy(&b[i * 2], &h, 2);
  }
  return b;
}

class CpuOps : public ::testing::Test {
 protected:
  CpuBackend backend_{2};
};

class CpuMatmul : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  CpuBackend backend_{2};
  CpuBackend exact_backend_{2, /*exact_matmul=*/true};
};

// Small steps of quantised weights run with activations rounded to int8 per
// block of 32 (like llama.cpp): the error of each product is then bounded by
// sum over blocks of (max|x_b| / 127 / 2) * sum|w_b|, which the check allows.
TEST_P(CpuMatmul, MatchesDequantisedReference) {
  const auto [dtype, t] = GetParam();
  const int64_t in = 512, out = 45;
  auto wbytes = RandomWeightBytes(dtype, out, in, 1);
  auto x = RandomFloats(size_t(t * in), 2);
  auto bias = RandomFloats(size_t(out), 3);
  std::vector<float> y(size_t(t * out));

  Tensor w = Tensor::Of(wbytes.data(), dtype, {out, in});
  Tensor xt = Tensor::Of(x.data(), DType::kF32, {t, in});
  Tensor bt = Tensor::Of(bias.data(), DType::kF32, {out});
  Tensor yt = Tensor::Of(y.data(), DType::kF32, {t, out});
  backend_.Matmul(xt, w, &bt, yt);
  std::vector<float> y_exact(size_t(t * out));
  exact_backend_.Matmul(xt, w, &bt, Tensor::Of(y_exact.data(), DType::kF32, {t, out}));

  std::vector<float> row(static_cast<size_t>(in));
  const uint64_t row_bytes = BytesFor(dtype, uint64_t(in)).value();
  for (int64_t o = 0; o < out; ++o) {
    DequantizeRow(dtype, wbytes.data() + o * row_bytes, row.data(), in);
    for (int64_t i = 0; i < t; ++i) {
      double ref = bias[size_t(o)], rounding = 0;
      for (int64_t k = 0; k < in; ++k) ref += double(row[size_t(k)]) * x[size_t(i * in + k)];
      if (Info(dtype).quantized && t <= kernels::IntegerMatmulMaxRows(dtype)) {
        for (int64_t b = 0; b < in; b += 32) {
          double max_x = 0, sum_w = 0;
          for (int64_t k = b; k < b + 32; ++k) {
            max_x = std::max(max_x, double(std::fabs(x[size_t(i * in + k)])));
            sum_w += std::fabs(row[size_t(k)]);
          }
          rounding += max_x / 127.0 / 2.0 * sum_w;
        }
      }
      EXPECT_NEAR(y[size_t(i * out + o)], ref, rounding + 1e-4 * (1 + std::fabs(ref)))
          << Name(dtype) << " t=" << t << " row " << o;
      EXPECT_NEAR(y_exact[size_t(i * out + o)], ref, 1e-4 * (1 + std::fabs(ref)))
          << "exact " << Name(dtype) << " t=" << t << " row " << o;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDTypes, CpuMatmul,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                         DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ5_K,
                                         DType::kQ6_K, DType::kIQ2_XS, DType::kIQ2_S,
                                         DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ1_S,
                                         DType::kIQ1_M),
                       ::testing::Values(int64_t(1), int64_t(3), int64_t(70))),
    [](const auto& info) {
      return std::string(Name(std::get<0>(info.param))) + "_t" +
             std::to_string(std::get<1>(info.param));
    });

// One MultiMatmul over projections of different weight types (as a q4_k file
// mixes in q8_0 / q6_k tensors) shares the quantised activations between
// them; each output still has the bits of its own Matmul, for decode and
// batched step sizes. Tasks run across the projections' boundaries: with 24
// rows each, tasks of 32 rows; with 20 (each projection padded to 24 in the
// task space, as the kernels start on whole groups of 8), tasks that end in a
// projection's last, partial group.
class CpuMultiMatmul : public ::testing::TestWithParam<int64_t> {};

TEST_P(CpuMultiMatmul, MixedWeightTypesGiveEachProjectionItsOwnMatmulsBits) {
  CpuBackend backend{2};
  const int64_t in = 256, rows = GetParam();
  const std::vector<DType> types = {DType::kQ4_0, DType::kQ8_0, DType::kF16, DType::kQ4_1,
                                    DType::kQ6_K};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Tensor> weights;
  for (size_t i = 0; i < types.size(); ++i) {
    bytes.push_back(RandomWeightBytes(types[i], rows, in, uint32_t(20 + i)));
    const TensorInfo info{"blk.0.attn_q.weight", types[i], {rows, in}, bytes.back().data(),
                          bytes.back().size()};
    auto w = backend.PrepareWeight(info);
    ASSERT_TRUE(w.ok());
    weights.push_back(*w);
  }
  for (int64_t t : {1, 4, 9}) {
    SCOPED_TRACE("t=" + std::to_string(t));
    auto x = RandomFloats(size_t(t * in), uint32_t(30 + t));
    const Tensor xt = Tensor::Of(x.data(), DType::kF32, {t, in});
    std::vector<std::vector<float>> together(types.size(), std::vector<float>(size_t(t * rows)));
    std::vector<Projection> projections;
    for (size_t i = 0; i < types.size(); ++i) {
      projections.push_back({&weights[i], nullptr,
                             Tensor::Of(together[i].data(), DType::kF32, {t, rows})});
    }
    backend.MultiMatmul(xt, projections);
    for (size_t i = 0; i < types.size(); ++i) {
      std::vector<float> alone(size_t(t * rows));
      backend.Matmul(xt, weights[i], nullptr, Tensor::Of(alone.data(), DType::kF32, {t, rows}));
      EXPECT_EQ(together[i], alone) << Name(types[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, CpuMultiMatmul, ::testing::Values(int64_t(24), int64_t(20)),
                         [](const auto& info) { return "rows" + std::to_string(info.param); });

// A row's matmul result does not depend on how many rows share the step (a
// sequence's prefill chunk, a serving batch) or on the thread count, on
// every CPU target, for every
// quantised type at every row count its integer kernels serve
// (IntegerMatmulMaxRows: every count for q8_0 / q4_0 / q4_1 on x86 AVX2 and
// AVX-512 VNNI, so no switch to the f32 kernels at 32 rows breaks it there),
// with the weights in the file's layout and stored as panels at load.
class CpuBatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuBatchInvariance, ARowGetsTheSameBitsInEveryBatch) {
  const testing::ScopedCpuTarget target(GetParam());
  // 2 threads (repacked at load or in place) and 1: the same bits from each.
  CpuBackend repacked{2}, in_place{2, /*exact_matmul=*/false, /*repack_weights=*/false};
  CpuBackend one_thread{1};
  const int64_t in = 256, out = 24, rows = 64;
  auto x = RandomFloats(size_t(rows * in), 40);
  int64_t most_rows_checked = 0;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K,
                      DType::kQ2_K, DType::kQ3_K, DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S,
                      DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ1_S, DType::kIQ1_M}) {
    const int64_t max_rows = kernels::IntegerMatmulMaxRows(dtype);
    const auto bytes = RandomWeightBytes(dtype, out, in, 41);
    const TensorInfo info{"blk.0.ffn_up.weight", dtype, {out, in}, bytes.data(), bytes.size()};
    std::vector<float> first_alone;
    for (CpuBackend* backend : {&repacked, &in_place, &one_thread}) {
      SCOPED_TRACE(std::string(Name(dtype)) + (backend == &repacked   ? " repacked"
                                               : backend == &in_place ? " in place"
                                                                      : " one thread"));
      auto w = backend->PrepareWeight(info);
      ASSERT_TRUE(w.ok());
      std::vector<float> alone(size_t(rows * out));
      for (int64_t r = 0; r < rows; ++r) {
        backend->Matmul(Tensor::Of(x.data() + r * in, DType::kF32, {1, in}), *w, nullptr,
                        Tensor::Of(alone.data() + r * out, DType::kF32, {1, out}));
      }
      if (first_alone.empty()) first_alone = alone;
      ASSERT_EQ(alone, first_alone) << "one row at a time: 2 threads against 1, panels against not";
      for (int64_t t : {3, 9, 31, 32, 33, 40, 64}) {
        if (t > max_rows) continue;  // the f32 kernels: other (not int8) activations
        most_rows_checked = std::max(most_rows_checked, t);
        std::vector<float> y(size_t(t * out));
        backend->Matmul(Tensor::Of(x.data(), DType::kF32, {t, in}), *w, nullptr,
                        Tensor::Of(y.data(), DType::kF32, {t, out}));
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(y[i], alone[i]) << "t=" << t << " row " << i / size_t(out);
        }
      }
    }
  }
  EXPECT_GE(most_rows_checked, 32);
  // Where q8_0 / q4_0 / q4_1 have panel kernels (x86 AVX2, AVX-512 VNNI) they
  // serve every row count: the 64-row step was checked.
  if (kernels::HasPanelKernels(DType::kQ8_0)) {
    EXPECT_EQ(most_rows_checked, 64);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCpuTarget, CpuBatchInvariance,
                         ::testing::ValuesIn(testing::CpuTargetNames()),
                         [](const auto& info) { return testing::TestNameOf(info.param); });

// out[t, n_h, d_v] against a double-precision reference: query token i sees
// positions 0..n_past + i, position p at pool row rows[p].
void ExpectAttentionMatchesReference(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v,
                                     const std::vector<int32_t>& rows, int64_t t, int64_t n_past,
                                     int64_t n_h, int64_t n_kv, int64_t d_k, int64_t d_v,
                                     float scale, const std::vector<float>& out) {
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t h = 0; h < n_h; ++h) {
      const int64_t kvh = h / (n_h / n_kv), keys = n_past + i + 1;
      std::vector<double> s(static_cast<size_t>(keys));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < d_k; ++d) {
          dot += double(q[size_t((i * n_h + h) * d_k + d)]) *
                 k[size_t((rows[size_t(j)] * n_kv + kvh) * d_k + d)];
        }
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t d = 0; d < d_v; ++d) {
        double ref = 0;
        for (int64_t j = 0; j < keys; ++j) {
          ref += s[size_t(j)] / sum * v[size_t((rows[size_t(j)] * n_kv + kvh) * d_v + d)];
        }
        EXPECT_NEAR(out[size_t((i * n_h + h) * d_v + d)], ref, 1e-5)
            << "token " << i << " head " << h << " dim " << d;
      }
    }
  }
}

// The cache is paged: position p lives at pool row rows[p] (a shuffled table),
// while the reference reads positions in order through the same table.
TEST_F(CpuOps, GqaAttentionOverPagedPartlyFilledCache) {
  const int64_t t = 3, n_past = 5, n_h = 4, n_kv = 2, d_k = 8, d_v = 6, cap = 16;
  auto q = RandomFloats(size_t(t * n_h * d_k), 4);
  auto k = RandomFloats(size_t(cap * n_kv * d_k), 5);
  auto v = RandomFloats(size_t(cap * n_kv * d_v), 6);
  std::vector<int32_t> rows(static_cast<size_t>(cap));
  for (int64_t p = 0; p < cap; ++p) rows[size_t(p)] = int32_t((p * 7 + 3) % cap);
  std::vector<float> out(size_t(t * n_h * d_v));
  const float scale = 0.3f;
  backend_.Attention(Tensor::Of(q.data(), DType::kF32, {t, n_h, d_k}),
                     Tensor::Of(k.data(), DType::kF32, {cap, n_kv, d_k}),
                     Tensor::Of(v.data(), DType::kF32, {cap, n_kv, d_v}), rows, n_past, scale,
                     Tensor::Of(out.data(), DType::kF32, {t, n_h, d_v}));
  ExpectAttentionMatchesReference(q, k, v, rows, t, n_past, n_h, n_kv, d_k, d_v, scale, out);
}

// Past kernels::kAttentionSegmentKeys keys a token's range is split into
// segments (3 here) merged afterwards. Decoding few tokens spreads the
// segments over the threads; a batch of 4+ tokens per thread runs each token
// whole in one task. A query's bits must not depend on which (a sequence
// decodes to the same tokens alone and in a batch), and both match the
// reference.
TEST_F(CpuOps, LongContextAttentionGivesTheSameBitsAloneAndInABatch) {
  const int64_t t = 3, n_past = 2 * kernels::kAttentionSegmentKeys + 200, n_h = 6, n_kv = 3;
  const int64_t d_k = 16, d_v = 12, cap = n_past + 8;
  auto q = RandomFloats(size_t(t * n_h * d_k), 14);
  auto k = RandomFloats(size_t(cap * n_kv * d_k), 15, 0.5f);
  auto v = RandomFloats(size_t(cap * n_kv * d_v), 16);
  std::vector<int32_t> rows(static_cast<size_t>(cap));
  for (int64_t p = 0; p < cap; ++p) rows[size_t(p)] = int32_t((p * 37 + 11) % cap);
  const Tensor kt = Tensor::Of(k.data(), DType::kF32, {cap, n_kv, d_k});
  const Tensor vt = Tensor::Of(v.data(), DType::kF32, {cap, n_kv, d_v});
  const float scale = 0.25f;
  auto job = [&](std::vector<float>& out) {
    return AttentionJob{Tensor::Of(q.data(), DType::kF32, {t, n_h, d_k}), &kt, &vt, rows, n_past,
                        Tensor::Of(out.data(), DType::kF32, {t, n_h, d_v})};
  };
  std::vector<float> alone(size_t(t * n_h * d_v));
  const AttentionJob one[] = {job(alone)};
  backend_.MultiAttention(one, scale);  // 3 tokens on 2 threads: segments over threads
  ExpectAttentionMatchesReference(q, k, v, rows, t, n_past, n_h, n_kv, d_k, d_v, scale, alone);

  std::vector<std::vector<float>> batched(4, std::vector<float>(alone.size()));
  const AttentionJob four[] = {job(batched[0]), job(batched[1]), job(batched[2]),
                               job(batched[3])};
  backend_.MultiAttention(four, scale);  // 12 tokens: a task per token
  for (const auto& out : batched) EXPECT_EQ(out, alone);
}

// The attention scratch that grows with the context (tiles' segment
// partials, few-token steps' partials) is what ReserveForContext reserves and
// the memory plan counts: reserved, no call within the context grows it; not
// reserved, the same calls end within the planned bytes. Before, attention
// scratch grew with the keys outside the plan.
TEST(CpuContextScratch, AttentionCallsFitTheContextReservation) {
  const int64_t n_h = 8, n_kv = 2, d = 64, step = 64;
  const int64_t max_keys = 4 * kernels::kAttentionSegmentKeys + 100;  // 5 segments
  ContextShape shape;
  shape.max_keys = max_keys;
  shape.step_tokens = step;
  shape.attention = {{n_h, n_kv, d, d}};
  auto q = RandomFloats(size_t(step * n_h * d), 31);
  auto k = RandomFloats(size_t(max_keys * n_kv * d), 32, 0.5f);
  auto v = RandomFloats(size_t(max_keys * n_kv * d), 33);
  std::vector<float> out(size_t(step * n_h * d));
  std::vector<int32_t> rows(static_cast<size_t>(max_keys));
  for (int64_t p = 0; p < max_keys; ++p) rows[size_t(p)] = int32_t(p);
  const Tensor kt = Tensor::Of(k.data(), DType::kF32, {max_keys, n_kv, d});
  const Tensor vt = Tensor::Of(v.data(), DType::kF32, {max_keys, n_kv, d});
  // Prefill chunks from several depths (a task per token) and few-token
  // steps of one to three sequences at the end of the context.
  auto run = [&](CpuBackend& b, const std::function<void()>& after_each) {
    for (int64_t n_past :
         {int64_t(0), int64_t(500), int64_t(1024), int64_t(1800), max_keys - step}) {
      const int64_t t = std::min(step, max_keys - n_past);
      b.Attention(Tensor::Of(q.data(), DType::kF32, {t, n_h, d}), kt, vt, rows, n_past, 0.125f,
                  Tensor::Of(out.data(), DType::kF32, {t, n_h, d}));
      after_each();
    }
    for (int64_t seqs : {1, 3}) {
      std::vector<AttentionJob> jobs;
      for (int64_t i = 0; i < seqs; ++i) {
        jobs.push_back({Tensor::Of(q.data() + i * n_h * d, DType::kF32, {1, n_h, d}), &kt, &vt,
                        rows, max_keys - 1 - i,
                        Tensor::Of(out.data() + i * n_h * d, DType::kF32, {1, n_h, d})});
      }
      b.MultiAttention(jobs, 0.125f);
      after_each();
    }
  };
  CpuBackend reserved(2);
  ASSERT_TRUE(reserved.ReserveForContext(shape).ok());
  const uint64_t planned = reserved.ContextScratchBytes(shape);
  EXPECT_EQ(reserved.scratch_bytes(), planned);
  run(reserved, [&] { EXPECT_EQ(reserved.scratch_bytes(), planned); });

  CpuBackend grown(2);
  run(grown, [] {});
  EXPECT_GT(grown.scratch_bytes(), 0u);  // the calls do use scratch
  EXPECT_LE(grown.scratch_bytes(), planned);
  std::printf("[ attention scratch: %.2f MiB used unreserved, %.2f MiB planned ]\n",
              double(grown.scratch_bytes()) / (1 << 20), double(planned) / (1 << 20));
}

// An f16 KV cache: ScatterRows rounds each new f32 row into it (the bits of
// F32ToF16), and attention over it gives exactly the bits of attention over an
// f32 cache holding those rounded values, alone and in a batch (a long context:
// segments over the threads alone, a task per token in the batch).
TEST_F(CpuOps, F16CacheRoundsRowsAndAttendsLikeAnF32CacheOfTheSameValues) {
  const int64_t t = 3, n_past = kernels::kAttentionSegmentKeys + 300, n_h = 6, n_kv = 3;
  const int64_t d_k = 16, d_v = 12, cap = n_past + 8;
  const auto q = RandomFloats(size_t(t * n_h * d_k), 24);
  const auto k = RandomFloats(size_t(cap * n_kv * d_k), 25, 0.5f);
  const auto v = RandomFloats(size_t(cap * n_kv * d_v), 26);
  std::vector<int32_t> rows(static_cast<size_t>(cap));
  for (int64_t p = 0; p < cap; ++p) rows[size_t(p)] = int32_t((p * 37 + 7) % cap);  // a permutation
  // Written through ScatterRows, as a step writes its new rows.
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  const Tensor kt16 = Tensor::Of(k16.data(), DType::kF16, {cap, n_kv, d_k});
  const Tensor vt16 = Tensor::Of(v16.data(), DType::kF16, {cap, n_kv, d_v});
  backend_.ScatterRows(Tensor::Of(const_cast<float*>(k.data()), DType::kF32, {cap, n_kv * d_k}),
                       rows, kt16.Reshaped({cap, n_kv * d_k}));
  backend_.ScatterRows(Tensor::Of(const_cast<float*>(v.data()), DType::kF32, {cap, n_kv * d_v}),
                       rows, vt16.Reshaped({cap, n_kv * d_v}));
  std::vector<float> k32(k.size()), v32(v.size());
  for (int64_t p = 0; p < cap; ++p) {
    const size_t r = size_t(rows[size_t(p)]);
    for (int64_t x = 0; x < n_kv * d_k; ++x) {
      const size_t stored = r * size_t(n_kv * d_k) + size_t(x);
      ASSERT_EQ(k16[stored], F32ToF16(k[size_t(p * n_kv * d_k + x)]));
      k32[stored] = F16ToF32(k16[stored]);
    }
    for (int64_t x = 0; x < n_kv * d_v; ++x) {
      const size_t stored = r * size_t(n_kv * d_v) + size_t(x);
      ASSERT_EQ(v16[stored], F32ToF16(v[size_t(p * n_kv * d_v + x)]));
      v32[stored] = F16ToF32(v16[stored]);
    }
  }
  const Tensor kt32 = Tensor::Of(k32.data(), DType::kF32, {cap, n_kv, d_k});
  const Tensor vt32 = Tensor::Of(v32.data(), DType::kF32, {cap, n_kv, d_v});
  const float scale = 0.25f;
  auto job = [&](const Tensor& kt, const Tensor& vt, std::vector<float>& out) {
    return AttentionJob{Tensor::Of(const_cast<float*>(q.data()), DType::kF32, {t, n_h, d_k}), &kt,
                        &vt, rows, n_past, Tensor::Of(out.data(), DType::kF32, {t, n_h, d_v})};
  };
  std::vector<float> from_f32(size_t(t * n_h * d_v)), from_f16(from_f32.size());
  const AttentionJob f32_job[] = {job(kt32, vt32, from_f32)};
  const AttentionJob f16_job[] = {job(kt16, vt16, from_f16)};
  backend_.MultiAttention(f32_job, scale);
  backend_.MultiAttention(f16_job, scale);
  EXPECT_EQ(from_f16, from_f32);

  std::vector<std::vector<float>> batched(4, std::vector<float>(from_f16.size()));
  const AttentionJob four[] = {job(kt16, vt16, batched[0]), job(kt16, vt16, batched[1]),
                               job(kt16, vt16, batched[2]), job(kt16, vt16, batched[3])};
  backend_.MultiAttention(four, scale);
  for (const auto& out : batched) EXPECT_EQ(out, from_f16);
}

// Rope keeps the cosines and sines of the last positions for the next call
// (every layer of a step): a call with other positions, another table or
// another attention factor recomputes them, and each gives RopeToken's bits.
TEST_F(CpuOps, RopeAnglesFollowPositionsAndTable) {
  const int64_t t = 3, heads = 2, d = 8;
  const std::vector<float> freqs_a = {1.0f, 0.1f, 0.01f, 0.001f};
  const std::vector<float> freqs_b = {0.5f, 0.05f, 0.005f, 0.0005f};
  RopeTable a{.inv_freq = freqs_a, .rotary_dims = 8};
  RopeTable b{.inv_freq = freqs_b, .rotary_dims = 8};
  RopeTable a_scaled = a;
  a_scaled.attention_factor = 1.5f;
  const std::vector<int32_t> p1 = {0, 5, 9}, p2 = {1, 5, 9};
  const auto x = RandomFloats(size_t(t * heads * d), 31);
  for (const auto& [table, positions] :
       std::vector<std::pair<const RopeTable*, const std::vector<int32_t>*>>{
           {&a, &p1}, {&a, &p1}, {&a, &p2}, {&b, &p2}, {&a_scaled, &p2}, {&a, &p1}}) {
    std::vector<float> ours = x, ref = x;
    backend_.Rope(Tensor::Of(ours.data(), DType::kF32, {t, heads, d}), *positions, *table);
    for (int64_t i = 0; i < t; ++i) {
      cpu::RopeToken(ref.data() + i * heads * d, heads, d, (*positions)[size_t(i)], *table);
    }
    EXPECT_EQ(ours, ref);
  }
}

TEST_F(CpuOps, RmsNormSwiGluAddEmbedding) {
  const int64_t n = 37;
  auto x = RandomFloats(size_t(2 * n), 7);
  auto w = RandomFloats(size_t(n), 8);
  std::vector<float> y(size_t(2 * n));
  backend_.RmsNorm(Tensor::Of(x.data(), DType::kF32, {2, n}), Tensor::Of(w.data(), DType::kF32, {n}),
                   1e-5f, Tensor::Of(y.data(), DType::kF32, {2, n}));
  for (int64_t r = 0; r < 2; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[size_t(r * n + i)], x[size_t(r * n + i)] * inv * w[size_t(i)], 1e-5);
    }
  }

  auto g = RandomFloats(size_t(n), 9), u = RandomFloats(size_t(n), 10);
  std::vector<float> s(static_cast<size_t>(n));
  backend_.SwiGlu(Tensor::Of(g.data(), DType::kF32, {1, n}), Tensor::Of(u.data(), DType::kF32, {1, n}),
                  Tensor::Of(s.data(), DType::kF32, {1, n}));
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[size_t(i)];
    EXPECT_NEAR(s[size_t(i)], gi / (1 + std::exp(-gi)) * u[size_t(i)], 1e-6);
  }

  backend_.Add(Tensor::Of(g.data(), DType::kF32, {n}), Tensor::Of(u.data(), DType::kF32, {n}),
               Tensor::Of(s.data(), DType::kF32, {n}));
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(s[size_t(i)], g[size_t(i)] + u[size_t(i)]);

  auto table = RandomWeightBytes(DType::kQ8_0, 5, 64, 11);
  std::vector<float> emb(2 * 64), ref(64);
  const int32_t ids[2] = {4, 1};
  backend_.Embedding(Tensor::Of(table.data(), DType::kQ8_0, {5, 64}), ids,
                     Tensor::Of(emb.data(), DType::kF32, {2, 64}));
  DequantizeRow(DType::kQ8_0, table.data() + 4 * 68, ref.data(), 64);
  EXPECT_EQ(std::vector<float>(emb.begin(), emb.begin() + 64), ref);
}

TEST_F(CpuOps, PrepareWeightConvertsSmallVectorsToF32) {
  std::vector<uint16_t> bf = {F32ToBF16(1.5f), F32ToBF16(-2.0f)};
  TensorInfo info{"norm.weight", DType::kBF16, {2}, reinterpret_cast<const uint8_t*>(bf.data()), 4};
  auto t = backend_.PrepareWeight(info);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->as<float>()[0], 1.5f);
  EXPECT_EQ(t->as<float>()[1], -2.0f);
}

// q8_0 / q4_0 / q4_1 matrices stored as panels at load (the default, where the
// machine has the VNNI kernels) give the in-place results bit for bit: a whole
// matrix for every step size, expert slices in one grouped pass, and a slice
// off the 8-row grid (which falls back to the file layout). Packing leaves the
// file's bytes as they were.
TEST(CpuPanels, StoredPanelsGiveTheInPlaceBitsAndLeaveTheFileIntact) {
  CpuBackend repacked{2}, in_place{2, /*exact_matmul=*/false, /*repack_weights=*/false};
  const int64_t experts = 3, rows = 24, in = 256;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    SCOPED_TRACE(std::string(Name(dtype)));
    const auto bytes = RandomWeightBytes(dtype, experts * rows, in, 11);
    const auto file = bytes;
    const TensorInfo info{"blk.0.ffn_up_exps.weight", dtype, {experts, rows, in}, bytes.data(),
                          bytes.size()};
    auto packed = repacked.PrepareWeight(info);
    auto view = in_place.PrepareWeight(info);
    ASSERT_TRUE(packed.ok() && view.ok());
    EXPECT_EQ(packed->panels != nullptr, kernels::HasPanelKernels(dtype));
    EXPECT_EQ(view->panels, nullptr);
    EXPECT_EQ(bytes, file);

    auto same_bits = [&](auto&& run) {
      std::vector<float> a, b;
      run(repacked, *packed, a);
      run(in_place, *view, b);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "at " << i;
    };
    const Tensor whole = packed->Reshaped({experts * rows, in});
    EXPECT_EQ(whole.panels, packed->panels);  // same columns: the panels stay
    for (int64_t t : {1, 3, 9}) {
      SCOPED_TRACE("t=" + std::to_string(t));
      auto x = RandomFloats(size_t(t * in), uint32_t(12 + t));
      same_bits([&](CpuBackend& backend, const Tensor& w3, std::vector<float>& y) {
        y.assign(size_t(t * experts * rows), 0.0f);
        backend.Matmul(Tensor::Of(x.data(), DType::kF32, {t, in}),
                       w3.Reshaped({experts * rows, in}), nullptr,
                       Tensor::Of(y.data(), DType::kF32, {t, experts * rows}));
      });
      // Rows of x split over the experts; and a slice that starts off the grid.
      same_bits([&](CpuBackend& backend, const Tensor& w3, std::vector<float>& y) {
        const Tensor w = w3.Reshaped({experts * rows, in});
        const std::vector<Tensor> slices = {w.RowSlice(0, rows), w.RowSlice(2 * rows, rows),
                                            w.RowSlice(4, rows)};
        const std::vector<int32_t> offsets = {0, int32_t(t / 3), int32_t(t / 2), int32_t(t)};
        y.assign(size_t(t * rows), 0.0f);
        backend.GroupedMatmul(Tensor::Of(x.data(), DType::kF32, {t, in}), slices, offsets,
                              Tensor::Of(y.data(), DType::kF32, {t, rows}));
      });
    }
  }
}

}  // namespace
}  // namespace anymoe
