// The CPU backend's DSA ops at GLM-5's indexer and latent sizes: IndexerTopK
// selects the keys a double-precision evaluation of the scores ranks first,
// and a query selects the same keys, and LatentAttention gives it the same
// bits, whether it runs alone (a decode step: keys or heads spread over the
// threads, exact scores) or among many (a prefill step: blocks of queries per
// task, int16 scores with bounds and exact scores near the threshold), on
// every CPU target, with ties, zero keys and values outside the int16 range.
// SelectTopKWithBounds selects what SelectTopK selects on the exact scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/indexer.h"
#include "backends/kernels/for_each_target.h"

namespace anymoe {
namespace {

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

constexpr int64_t kHeads = 32, kDim = 128, kTopK = 64, kPast = 2500, kTokens = 21;

class CpuDsa : public ::testing::Test {
 protected:
  CpuDsa()
      : q_(RandomFloats(size_t(kTokens * kHeads * kDim), 1)),
        w_(RandomFloats(size_t(kTokens * kHeads), 2)),
        keys_(RandomFloats(size_t((kPast + kTokens) * kDim), 3)),
        rows_(size_t(kPast + kTokens)) {
    // Pool rows out of order, as a paged cache hands them out.
    for (size_t p = 0; p < rows_.size(); ++p) rows_[p] = int32_t((p * 7919 + 13) % rows_.size());
  }

  // Tokens [t0, t0 + t) of the step as one call; selection [t, kTopK].
  std::vector<int32_t> Select(int64_t t0, int64_t t, std::vector<int32_t>* counts) {
    std::vector<int32_t> selection(size_t(t * kTopK), -1);
    counts->assign(size_t(t), 0);
    backend_.IndexerTopK(
        Tensor::Of(q_.data() + t0 * kHeads * kDim, DType::kF32, {t, kHeads, kDim}),
        Tensor::Of(keys_.data(), DType::kF32, {int64_t(rows_.size()), kDim}),
        Tensor::Of(w_.data() + t0 * kHeads, DType::kF32, {t, kHeads}), rows_, kPast + t0,
        1.0f / std::sqrt(float(kDim)), kTopK, selection, *counts);
    return selection;
  }

  CpuBackend backend_{2};
  std::vector<float> q_, w_, keys_;
  std::vector<int32_t> rows_;
};

TEST_F(CpuDsa, IndexerSelectsTheBestScoredKeysAloneAndInABatch) {
  std::vector<int32_t> counts;
  const std::vector<int32_t> batch = Select(0, kTokens, &counts);  // blocks of queries per task
  int compared = 0;
  for (int64_t ti = 0; ti < kTokens; ++ti) {
    const int64_t n_keys = kPast + ti + 1;
    ASSERT_EQ(counts[size_t(ti)], kTopK);
    std::vector<int32_t> alone_counts;
    const std::vector<int32_t> alone = Select(ti, 1, &alone_counts);  // keys over the threads
    ASSERT_EQ(alone_counts[0], kTopK);
    const std::vector<int32_t> got(batch.begin() + ti * kTopK, batch.begin() + (ti + 1) * kTopK);
    EXPECT_EQ(alone, got) << "token " << ti;

    std::vector<double> score(static_cast<size_t>(n_keys));
    for (int64_t u = 0; u < n_keys; ++u) {
      const float* k = keys_.data() + int64_t(rows_[size_t(u)]) * kDim;
      double total = 0;
      for (int64_t h = 0; h < kHeads; ++h) {
        double dot = 0;
        for (int64_t i = 0; i < kDim; ++i) dot += double(q_[size_t((ti * kHeads + h) * kDim + i)]) * k[i];
        total += w_[size_t(ti * kHeads + h)] * std::max(0.0, dot / std::sqrt(double(kDim)));
      }
      score[size_t(u)] = total;
    }
    std::vector<int32_t> order(static_cast<size_t>(n_keys));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return score[size_t(a)] != score[size_t(b)] ? score[size_t(a)] > score[size_t(b)] : a < b;
    });
    // Compare where float rounding cannot swap the k-th and (k+1)-th key.
    if (score[size_t(order[kTopK - 1])] - score[size_t(order[kTopK])] < 1e-3) continue;
    std::vector<int32_t> want(order.begin(), order.begin() + kTopK);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want) << "token " << ti;
    ++compared;
  }
  EXPECT_GE(compared, kTokens / 2);
}

// Prefill (a block of queries: exact scores, or with the int16 path int16
// scores, bounds and an exact band; on, off, and where the target makes it
// pay) against decode (each query alone, every key scored exactly) on every
// target, with
// keys that tie (repeated), all-zero keys, keys of very different norms, a
// top-k of a quarter of the keys, and then one key outside the int16 range
// (the call scores exactly).
TEST_F(CpuDsa, PrefillSelectsWhatDecodeSelectsOnEveryTarget) {
  for (int64_t u = 0; u < int64_t(rows_.size()); ++u) {
    float* k = keys_.data() + int64_t(rows_[size_t(u)]) * kDim;
    if (u % 97 == 5) std::copy_n(keys_.data() + int64_t(rows_[3]) * kDim, kDim, k);  // ties
    if (u % 89 == 7) std::fill_n(k, kDim, 0.0f);
    if (u % 13 == 1) std::for_each(k, k + kDim, [](float& x) { x *= 64.0f; });
  }
  for (const bool untamed : {false, true}) {
    if (untamed) keys_[size_t(rows_[17]) * kDim + 5] = 1e30f;
    for (const int64_t topk : {kTopK, int64_t{640}}) {
      for (const Int16Indexer mode : {Int16Indexer::kOff, Int16Indexer::kOn, Int16Indexer::kAuto}) {
        backend_.set_int16_indexer(mode);
        testing::ForEachTarget([&] {
          SCOPED_TRACE(::testing::Message() << "topk " << topk << (untamed ? ", a 1e30 key" : "")
                                            << ", int16 indexer " << int(mode));
          const int64_t t = 19;
          std::vector<int32_t> batch(static_cast<size_t>(t * topk)), counts(static_cast<size_t>(t));
          auto call = [&](int64_t t0, int64_t n, std::span<int32_t> sel, std::span<int32_t> cnt) {
            backend_.IndexerTopK(
                Tensor::Of(q_.data() + t0 * kHeads * kDim, DType::kF32, {n, kHeads, kDim}),
                Tensor::Of(keys_.data(), DType::kF32, {int64_t(rows_.size()), kDim}),
                Tensor::Of(w_.data() + t0 * kHeads, DType::kF32, {n, kHeads}), rows_, kPast + t0,
                0.088f, topk, sel, cnt);
          };
          call(0, t, batch, counts);
          for (int64_t ti = 0; ti < t; ++ti) {
            std::vector<int32_t> alone(static_cast<size_t>(topk)), alone_count(1);
            call(ti, 1, alone, alone_count);
            ASSERT_EQ(counts[size_t(ti)], alone_count[0]);
            ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + ti * topk))
                << "token " << ti;
          }
        });
      }
    }
  }
}

// What ReserveForContext holds for a context is what the memory plan counts
// (ContextScratchBytes), and every indexer call within that context fits it:
// decode, verify and prefill steps, the int16 path on or off, keys it cannot
// take (the exact fallback). Before, a first long prefill grew the scratch
// past the plan.
TEST_F(CpuDsa, IndexerCallsFitTheContextReservation) {
  const int64_t keys = kPast + kTokens;
  ContextShape shape;
  shape.max_keys = keys;
  shape.step_tokens = kTokens;
  shape.indexer = {kHeads, kDim};
  ASSERT_TRUE(backend_.ReserveForContext(shape).ok());
  const uint64_t reserved = backend_.scratch_bytes();
  EXPECT_EQ(reserved, backend_.ContextScratchBytes(shape));
  EXPECT_GE(reserved, uint64_t(keys) * 4 * (8 + 2 * 9));
  std::vector<int32_t> counts;
  for (const bool untamed : {false, true}) {
    if (untamed) keys_[size_t(rows_[17]) * kDim + 5] = 1e30f;
    for (const Int16Indexer mode : {Int16Indexer::kOff, Int16Indexer::kOn, Int16Indexer::kAuto}) {
      backend_.set_int16_indexer(mode);
      Select(0, kTokens, &counts);      // prefill: blocks of queries
      Select(kTokens - 8, 8, &counts);  // verify: the few-queries path
      Select(kTokens - 1, 1, &counts);  // decode
      EXPECT_EQ(backend_.scratch_bytes(), reserved) << "int16 indexer " << int(mode);
    }
  }
  // Without an indexer nothing is reserved.
  CpuBackend plain(2);
  ContextShape none = shape;  // the same context without an indexer
  none.indexer = {};
  ASSERT_TRUE(plain.ReserveForContext(none).ok());
  EXPECT_EQ(plain.scratch_bytes(), 0u);
  EXPECT_EQ(plain.ContextScratchBytes(none), 0u);
}

TEST(SelectTopKWithBounds, SelectsWhatTheExactScoresSelect) {
  std::mt19937 rng(5);
  int64_t decided = 0, total = 0;
  for (int round = 0; round < 400; ++round) {
    const int64_t topk = 1 + int64_t(rng() % 40), n = topk + 1 + int64_t(rng() % 300);
    // Scores from a few values (ties everywhere) or continuous ones.
    const bool coarse = round % 2 == 0;
    std::vector<float> exact(static_cast<size_t>(n)), approx(exact.size()), bound(exact.size());
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    const float width = round % 5 == 0 ? 0.0f : round % 5 == 1 ? 100.0f : 0.05f;
    for (int64_t u = 0; u < n; ++u) {
      exact[size_t(u)] = coarse ? float(int(rng() % 7)) * 0.25f : unit(rng);
      bound[size_t(u)] = width * (0.5f + 0.5f * std::abs(unit(rng)));
      approx[size_t(u)] = exact[size_t(u)] + bound[size_t(u)] * unit(rng);
      // approx +- bound must still contain the exact score after rounding.
      bound[size_t(u)] = std::abs(approx[size_t(u)] - exact[size_t(u)]) +
                         (width == 0.0f ? 0.0f : bound[size_t(u)] * 1e-3f);
    }
    std::vector<int32_t> order(static_cast<size_t>(n)), want(static_cast<size_t>(topk));
    ASSERT_EQ(cpu::SelectTopK(exact.data(), n, topk, order.data(), want.data()), topk);

    std::vector<float> lower(exact.size()), upper(exact.size()), band_scores(exact.size());
    std::vector<int32_t> sure(exact.size()), band(exact.size()), got(static_cast<size_t>(topk));
    const cpu::BoundedSelectScratch scratch{lower.data(), upper.data(),       sure.data(),
                                            band.data(),  band_scores.data(), order.data()};
    int64_t band_size = -1;
    auto score_exactly = [&](const int32_t* positions, int64_t count, float* out) {
      for (int64_t i = 0; i < count; ++i) out[i] = exact[size_t(positions[i])];
    };
    ASSERT_EQ(cpu::SelectTopKWithBounds(approx.data(), bound.data(), n, topk, score_exactly,
                                        scratch, got.data(), &band_size),
              topk);
    ASSERT_EQ(got, want) << "round " << round << ": " << n << " keys, top " << topk;
    ASSERT_GE(band_size, 0);
    ASSERT_LE(band_size, n);
    decided += n - band_size;
    total += n;
  }
  // Narrow bounds decide most keys without an exact score.
  EXPECT_GT(decided, total / 2);
}

TEST_F(CpuDsa, FewerKeysThanTopKSelectsEveryVisibleKey) {
  std::vector<int32_t> selection(size_t(2 * 4)), counts(2);
  backend_.IndexerTopK(Tensor::Of(q_.data(), DType::kF32, {2, kHeads, kDim}),
                       Tensor::Of(keys_.data(), DType::kF32, {int64_t(rows_.size()), kDim}),
                       Tensor::Of(w_.data(), DType::kF32, {2, kHeads}), rows_, 2, 0.1f, 4,
                       selection, counts);
  EXPECT_EQ(counts, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(std::vector<int32_t>(selection.begin(), selection.begin() + 3),
            (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(std::vector<int32_t>(selection.begin() + 4, selection.end()),
            (std::vector<int32_t>{0, 1, 2, 3}));
}

// Latent rows [kv_lora + rope] of GLM-5 (512 + 64), 64 heads: a token's heads
// in one task in a prefill, in groups over the threads when it decodes alone.
TEST_F(CpuDsa, LatentAttentionGivesATokenTheSameBitsAloneAndInABatch) {
  const int64_t n_h = 64, r = 512, d = r + 64, t = 9, n_past = 700;
  auto q = RandomFloats(size_t(t * n_h * d), 4);
  auto latent = RandomFloats(size_t((n_past + t) * d), 5);
  for (float& x : latent) x *= 0.05f;
  std::vector<int32_t> rows(size_t(n_past + t));
  for (size_t p = 0; p < rows.size(); ++p) rows[p] = int32_t((p * 31 + 7) % rows.size());
  const Tensor pool = Tensor::Of(latent.data(), DType::kF32, {n_past + t, d});
  // A DSA selection: every third visible position.
  std::vector<int32_t> keys(static_cast<size_t>(t * (n_past + t))), counts(static_cast<size_t>(t));
  for (int64_t ti = 0; ti < t; ++ti) {
    int32_t n = 0;
    for (int32_t u = 0; u <= n_past + ti; u += 3) keys[size_t(ti * (n_past + t) + n++)] = u;
    counts[size_t(ti)] = n;
  }
  for (const bool dsa : {false, true}) {
    SCOPED_TRACE(dsa ? "selected keys" : "every key");
    std::vector<float> batch(size_t(t * n_h * r));
    const KeySelection all{keys, counts, n_past + t};
    backend_.LatentAttention(Tensor::Of(q.data(), DType::kF32, {t, n_h, d}), pool, r, rows, n_past,
                             0.06f, dsa ? &all : nullptr,
                             Tensor::Of(batch.data(), DType::kF32, {t, n_h, r}));
    for (int64_t ti = 0; ti < t; ++ti) {
      std::vector<float> alone(size_t(n_h * r));
      const KeySelection one{std::span(keys).subspan(size_t(ti * (n_past + t))),
                             std::span(counts).subspan(size_t(ti), 1), n_past + t};
      backend_.LatentAttention(Tensor::Of(q.data() + ti * n_h * d, DType::kF32, {1, n_h, d}), pool,
                               r, rows, n_past + ti, 0.06f, dsa ? &one : nullptr,
                               Tensor::Of(alone.data(), DType::kF32, {1, n_h, r}));
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + ti * n_h * r))
          << "token " << ti;
    }
  }
}

}  // namespace
}  // namespace anymoe
