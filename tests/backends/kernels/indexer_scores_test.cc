// The DSA indexer's vectorised scores against a double-precision evaluation of
// the definition, on every Highway target compiled in; and a key's score the
// same bits whichever run of keys it is scored in (four keys at a time or one).
#include "backends/cpu/kernels/indexer_scores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

}  // namespace
}  // namespace anymoe::kernels
