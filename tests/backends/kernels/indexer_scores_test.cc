// The DSA indexer's vectorised scores against a double-precision evaluation of
// the definition, on every Highway target compiled in; a key's score the same
// bits whichever run of keys it is scored in (four keys at a time or one); and
// the block-of-queries kernel the same bits as the one-query kernel.
#include "backends/cpu/kernels/indexer_scores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

TEST(IndexerScores, MatchTheDefinitionAndDoNotDependOnTheRunOnEveryTarget) {
  testing::ForEachTarget([] {
    // GLM-5's 32 x 128, and head counts that leave part of a vector empty.
    for (auto [n_heads, dim] : {std::pair<int64_t, int64_t>{32, 128}, {5, 24}, {1, 3}}) {
      const int64_t n_keys = 67;
      const auto q = testing::UniformFloats(size_t(n_heads * dim), 1);
      const auto w = testing::UniformFloats(size_t(n_heads), 2);
      const auto keys = testing::UniformFloats(size_t(n_keys * dim), 3);
      std::vector<int32_t> rows(static_cast<size_t>(n_keys));
      for (int64_t u = 0; u < n_keys; ++u) rows[size_t(u)] = int32_t((u * 29 + 5) % n_keys);
      const float scale = 1.0f / std::sqrt(float(dim));
      std::vector<float> q_t(size_t(IndexerHeadSlots(n_heads) * dim));
      IndexerQueryLayout(q.data(), n_heads, dim, q_t.data());

      std::vector<float> all(static_cast<size_t>(n_keys));
      IndexerScores(q_t.data(), w.data(), n_heads, dim, keys.data(), rows.data(), 0, n_keys, scale,
                    all.data());
      for (int64_t u = 0; u < n_keys; ++u) {
        const float* k = keys.data() + rows[size_t(u)] * dim;
        double total = 0, bound = 0;
        for (int64_t h = 0; h < n_heads; ++h) {
          double dot = 0, abs_dot = 0;
          for (int64_t i = 0; i < dim; ++i) {
            dot += double(q[size_t(h * dim + i)]) * k[i];
            abs_dot += std::abs(double(q[size_t(h * dim + i)]) * k[i]);
          }
          total += w[size_t(h)] * std::max(0.0, dot * scale);
          bound += std::abs(w[size_t(h)]) * abs_dot * scale;
        }
        // float rounding of the chains: a few ulps of the magnitudes summed.
        EXPECT_NEAR(all[size_t(u)], total, 1e-6 * double(dim + n_heads) * bound + 1e-30)
            << n_heads << "x" << dim << " key " << u;
      }
      // Odd runs: keys move between the four-key and the one-key paths.
      for (int64_t u0 : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{30}}) {
        for (int64_t u1 : {u0 + 1, u0 + 5, n_keys}) {
          std::vector<float> part(size_t(u1 - u0));
          IndexerScores(q_t.data(), w.data(), n_heads, dim, keys.data(), rows.data(), u0, u1,
                        scale, part.data());
          for (int64_t u = u0; u < u1; ++u) {
            ASSERT_EQ(part[size_t(u - u0)], all[size_t(u)]) << u0 << ".." << u1 << " key " << u;
          }
        }
      }
    }
  });
}

// Values that stress the equality rather than the accuracy: mixed signs and
// magnitudes, tiny ones (products underflow to subnormals), huge ones (products
// overflow to inf, and inf - inf makes NaN, which the ReLU maps to 0), exact
// zeros of both signs; the caller repeats a key so that scores tie.
std::vector<float> AwkwardFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 15), tiny(-30, -20), huge(20, 25), mid(-5, 5);
  std::vector<float> v(n);
  for (float& x : v) {
    const int k = kind(rng);
    const int e = k == 2 ? tiny(rng) : k == 3 ? huge(rng) : k == 4 ? mid(rng) : 0;
    x = k == 0 ? 0.0f : k == 1 ? -0.0f : u(rng) * std::pow(10.0f, float(e));
  }
  return v;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(IndexerScores, ABlockOfQueriesScoresTheSameBitsAsOneQueryOnEveryTarget) {
  testing::ForEachTarget([] {
    // GLM-5's 32 x 128; head counts below, at and past a register tile (6 or
    // 8) with every remainder; odd dims.
    const std::pair<int64_t, int64_t> shapes[] = {{32, 128}, {13, 24}, {7, 5}, {1, 3}, {9, 1}};
    for (auto [n_heads, dim] : shapes) {
      for (bool awkward : {false, true}) {
        const int64_t n_keys = 83, nq = 3, q_stride = n_heads * dim + 5, w_stride = n_heads + 2;
        const uint32_t seed = uint32_t(n_heads * 100 + dim + (awkward ? 7 : 0));
        const auto make = awkward ? AwkwardFloats : testing::UniformFloats;
        const auto q = make(size_t(nq * q_stride), seed);
        const auto w = make(size_t(nq * w_stride), seed + 1);
        auto keys = make(size_t(n_keys * dim), seed + 2);
        std::copy(keys.begin(), keys.begin() + dim, keys.begin() + 40 * dim);  // a tie
        std::vector<int32_t> rows(static_cast<size_t>(n_keys));
        for (int64_t u = 0; u < n_keys; ++u) rows[size_t(u)] = int32_t((u * 31 + 2) % n_keys);
        const float scale = 1.0f / std::sqrt(float(dim));
        std::vector<float> tile(size_t(IndexerTileFloats(dim)));
        std::vector<float> q_t(size_t(IndexerHeadSlots(n_heads) * dim));
        for (auto [u0, u1] : {std::pair<int64_t, int64_t>{0, n_keys}, {5, 6}, {3, 70}, {17, 49}}) {
          const int64_t score_stride = u1 - u0 + 3;
          std::vector<float> block(size_t(nq * score_stride), 12345.0f);
          IndexerScoresQueries(q.data(), q_stride, w.data(), w_stride, nq, n_heads, dim,
                               keys.data(), rows.data(), u0, u1, scale, block.data(),
                               score_stride, tile.data());
          for (int64_t j = 0; j < nq; ++j) {
            IndexerQueryLayout(q.data() + j * q_stride, n_heads, dim, q_t.data());
            std::vector<float> one(size_t(u1 - u0));
            IndexerScores(q_t.data(), w.data() + j * w_stride, n_heads, dim, keys.data(),
                          rows.data(), u0, u1, scale, one.data());
            for (int64_t u = 0; u < u1 - u0; ++u) {
              const float got = block[size_t(j * score_stride + u)];
              ASSERT_TRUE(SameBits(got, one[size_t(u)]))
                  << n_heads << "x" << dim << (awkward ? " awkward" : "") << " query " << j
                  << " keys " << u0 << ".." << u1 << " key " << u0 + u << ": " << got << " vs "
                  << one[size_t(u)];
            }
            // Past u1 in the row: untouched.
            for (int64_t u = u1 - u0; u < score_stride; ++u) {
              ASSERT_EQ(block[size_t(j * score_stride + u)], 12345.0f);
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace anymoe::kernels
