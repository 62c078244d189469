// The DSA indexer's int16 scores on every Highway target compiled in: each is
// the definition evaluated on the quantised values (int64 dots here), and each
// lies within its bound of the exact f32 kernel's score (the property that
// makes the prefill selection exact), for data of many scales and shapes,
// including the worst cases of the quantisation (keys along the query, one
// large element among small ones, all-zero heads and keys); values outside the
// bound's range are reported, never scored.
#include "backends/cpu/kernels/indexer_int16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels/indexer_scores.h"
#include "backends/kernels/for_each_target.h"

namespace anymoe::kernels {
namespace {

struct Case {
  int64_t n_heads, dim, n_keys;
  float scale;
};

// Mixed data: normal values times a per-vector magnitude from 2^-19 to 2^19,
// some vectors with one dominant element, some all zero, some keys equal to a
// query head (the largest dot), some heads zero; weights of both signs and
// many magnitudes, some zero.
struct Data {
  std::vector<float> q, w, keys;
  std::vector<int32_t> rows;
};

Data MakeData(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-19, 18), kind(0, 9);
  auto fill = [&](float* v, int64_t n) {
    const int k = kind(rng);
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    for (int64_t i = 0; i < n; ++i) v[i] = k == 0 ? 0.0f : normal(rng) * magnitude;
    if (k == 1) {  // one element dominates: the others quantise to almost nothing
      for (int64_t i = 0; i < n; ++i) v[i] *= 1e-4f;
      v[n / 2] = magnitude;
    }
  };
  Data d;
  d.q.resize(size_t(c.n_heads * c.dim));
  d.w.resize(size_t(c.n_heads));
  d.keys.resize(size_t(c.n_keys * c.dim));
  for (int64_t h = 0; h < c.n_heads; ++h) fill(d.q.data() + h * c.dim, c.dim);
  for (float& x : d.w) {
    x = kind(rng) == 0 ? 0.0f : normal(rng) * std::ldexp(1.0f, exponent(rng) / 2);
  }
  for (int64_t u = 0; u < c.n_keys; ++u) {
    float* k = d.keys.data() + u * c.dim;
    fill(k, c.dim);
    if (u % 11 == 3) {  // along a query head, scaled
      const int64_t h = u % c.n_heads;
      for (int64_t i = 0; i < c.dim; ++i) k[i] = d.q[size_t(h * c.dim + i)] * 0.5f;
      if (std::all_of(k, k + c.dim, [](float x) { return x == 0.0f || std::abs(x) >= 0x1p-20f; })) {
        continue;
      }
      std::fill(k, k + c.dim, 0.0f);
    }
  }
  d.rows.resize(size_t(c.n_keys));
  for (int64_t u = 0; u < c.n_keys; ++u) d.rows[size_t(u)] = int32_t((u * 37 + 11) % c.n_keys);
  return d;
}

// Tame by construction except that a dominant element's small neighbours may
// fall under 2^-20 of the vector's magnitude; only the vector's maximum counts.
const Case kCases[] = {{32, 128, 300, 0.088f},
                       {5, 24, 97, 1.0f},
                       {7, 3, 41, 0.5f},
                       {1, 1, 9, 2.0f},
                       {9, 130, 66, 0.01f}};

TEST(IndexerInt16, ScoresAreTheDefinitionOnTheQuantisedValuesOnEveryTarget) {
  testing::ForEachTarget([] {
    for (const Case& c : kCases) {
      const Data d = MakeData(c, uint32_t(c.n_heads * 1000 + c.dim));
      const int64_t n_pairs = IndexerInt16Pairs(c.dim), tile = IndexerInt16TileKeys();
      const int64_t padded = (c.n_keys + tile - 1) / tile * tile;
      std::vector<int16_t> tiles(static_cast<size_t>(IndexerInt16KeyElements(c.n_keys, c.dim)), 7);
      std::vector<float> key_scale(static_cast<size_t>(padded), -1),
          abs_sum(static_cast<size_t>(padded), -1);
      const IndexerKeyQuant kq{tiles.data(), key_scale.data(), abs_sum.data()};
      // Two runs where there are more keys than a tile, the second ending the
      // keys: a run boundary on a tile.
      const int64_t split = c.n_keys > tile ? tile : 0;
      ASSERT_TRUE(QuantizeIndexerKeys(d.keys.data(), d.rows.data(), c.dim, 0, split, false, kq));
      ASSERT_TRUE(
          QuantizeIndexerKeys(d.keys.data(), d.rows.data(), c.dim, split, c.n_keys, true, kq));
      std::vector<int32_t> pairs(static_cast<size_t>(2 * c.n_heads * n_pairs));
      std::vector<float> head_scale(static_cast<size_t>(2 * c.n_heads));
      IndexerQueryQuant qq{pairs.data(), head_scale.data()};
      ASSERT_TRUE(QuantizeIndexerQuery(d.q.data(), d.w.data(), c.n_heads, c.dim, c.scale, qq));
      // The second query: the first's heads reversed.
      std::vector<float> q2(d.q.size()), w2(d.w.rbegin(), d.w.rend());
      for (int64_t h = 0; h < c.n_heads; ++h) {
        std::copy_n(d.q.data() + (c.n_heads - 1 - h) * c.dim, c.dim, q2.data() + h * c.dim);
      }
      IndexerQueryQuant qq2{pairs.data() + c.n_heads * n_pairs, head_scale.data() + c.n_heads};
      ASSERT_TRUE(QuantizeIndexerQuery(q2.data(), w2.data(), c.n_heads, c.dim, c.scale, qq2));
      std::vector<float> w_both(d.w);
      w_both.insert(w_both.end(), w2.begin(), w2.end());

      const int64_t stride = padded + 3;
      std::vector<float> scores(static_cast<size_t>(2 * stride), 12345.0f);
      IndexerInt16Scores(pairs.data(), c.n_heads * n_pairs, head_scale.data(), c.n_heads,
                         w_both.data(), c.n_heads, 2, c.n_heads, c.dim, kq, 0, c.n_keys,
                         scores.data(), stride);
      for (int64_t j = 0; j < 2; ++j) {
        for (int64_t u = 0; u < c.n_keys; ++u) {
          double want = 0, magnitude = 0;
          for (int64_t h = 0; h < c.n_heads; ++h) {
            int64_t dot = 0;
            for (int64_t p = 0; p < n_pairs; ++p) {
              const int32_t qp = pairs[size_t((j * c.n_heads + h) * n_pairs + p)];
              const int16_t* k =
                  tiles.data() + ((u / tile) * n_pairs + p) * tile * 2 + (u % tile) * 2;
              dot += int64_t(int16_t(qp & 0xffff)) * k[0] + int64_t(int16_t(qp >> 16)) * k[1];
            }
            const double x = double(dot) * head_scale[size_t(j * c.n_heads + h)];
            want += w_both[size_t(j * c.n_heads + h)] * std::max(0.0, x);
            magnitude += std::abs(w_both[size_t(j * c.n_heads + h)] * x);
          }
          want *= key_scale[size_t(u)];
          magnitude *= key_scale[size_t(u)];
          EXPECT_NEAR(scores[size_t(j * stride + u)], want, 1e-6 * (c.n_heads + 4) * magnitude)
              << c.n_heads << "x" << c.dim << " query " << j << " key " << u;
        }
        // Whole tiles are written, nothing past them.
        for (int64_t u = padded; u < stride; ++u)
          ASSERT_EQ(scores[size_t(j * stride + u)], 12345.0f);
      }
    }
  });
}

TEST(IndexerInt16, EveryExactScoreLiesWithinItsBoundOnEveryTarget) {
  testing::ForEachTarget([] {
    int64_t checked = 0;
    double tightest = 1e30;  // the smallest bound / |error| seen (> 1 means it holds)
    for (const Case& c : kCases) {
      for (uint32_t seed = 0; seed < 6; ++seed) {
        const Data d = MakeData(c, seed * 7919 + uint32_t(c.dim));
        const int64_t tile = IndexerInt16TileKeys();
        const int64_t padded = (c.n_keys + tile - 1) / tile * tile;
        std::vector<int16_t> tiles(static_cast<size_t>(IndexerInt16KeyElements(c.n_keys, c.dim)));
        std::vector<float> key_scale(static_cast<size_t>(padded)),
            abs_sum(static_cast<size_t>(padded));
        const IndexerKeyQuant kq{tiles.data(), key_scale.data(), abs_sum.data()};
        ASSERT_TRUE(
            QuantizeIndexerKeys(d.keys.data(), d.rows.data(), c.dim, 0, c.n_keys, true, kq));
        std::vector<int32_t> pairs(static_cast<size_t>(c.n_heads * IndexerInt16Pairs(c.dim)));
        std::vector<float> head_scale(static_cast<size_t>(c.n_heads));
        IndexerQueryQuant qq{pairs.data(), head_scale.data()};
        ASSERT_TRUE(QuantizeIndexerQuery(d.q.data(), d.w.data(), c.n_heads, c.dim, c.scale, qq));
        std::vector<float> approx(static_cast<size_t>(padded));
        IndexerInt16Scores(pairs.data(), 0, head_scale.data(), 0, d.w.data(), 0, 1, c.n_heads,
                           c.dim, kq, 0, c.n_keys, approx.data(), padded);
        std::vector<float> q_t(static_cast<size_t>(IndexerHeadSlots(c.n_heads) * c.dim)),
            exact(static_cast<size_t>(c.n_keys));
        IndexerQueryLayout(d.q.data(), c.n_heads, c.dim, q_t.data());
        IndexerScores(q_t.data(), d.w.data(), c.n_heads, c.dim, d.keys.data(), d.rows.data(), 0,
                      c.n_keys, c.scale, exact.data());
        for (int64_t u = 0; u < c.n_keys; ++u) {
          const float bound =
              (qq.bound_p + qq.bound_r * abs_sum[size_t(u)]) * key_scale[size_t(u)] +
              kIndexerBoundFloor;
          const double error = std::abs(double(exact[size_t(u)]) - approx[size_t(u)]);
          ASSERT_LE(error, bound) << c.n_heads << "x" << c.dim << " seed " << seed << " key " << u
                                  << ": exact " << exact[size_t(u)] << " approx "
                                  << approx[size_t(u)];
          if (error > 0) tightest = std::min(tightest, bound / error);
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 1000);
    // The bound is not vacuous: somewhere the error comes within 100x of it.
    EXPECT_LT(tightest, 100.0);
  });
}

TEST(IndexerInt16, ValuesOutsideTheBoundsRangeAreReported) {
  const int64_t n_heads = 2, dim = 4;
  std::vector<int32_t> pairs(static_cast<size_t>(n_heads * 2));
  std::vector<float> head_scale(static_cast<size_t>(n_heads));
  IndexerQueryQuant qq{pairs.data(), head_scale.data()};
  const std::vector<float> w = {0.5f, -1.0f};
  auto query_ok = [&](float value, float weight, float scale) {
    std::vector<float> q(static_cast<size_t>(n_heads * dim), 1.0f);
    q[5] = value;
    const std::vector<float> ww = {weight, -1.0f};
    return QuantizeIndexerQuery(q.data(), ww.data(), n_heads, dim, scale, qq);
  };
  EXPECT_TRUE(query_ok(3.0f, 0.5f, 0.1f));
  EXPECT_TRUE(query_ok(0.0f, 0.0f, 0.1f));  // zero weights and elements are exact
  EXPECT_FALSE(query_ok(NAN, 0.5f, 0.1f));
  EXPECT_FALSE(query_ok(INFINITY, 0.5f, 0.1f));
  EXPECT_FALSE(query_ok(0x1p21f, 0.5f, 0.1f));
  EXPECT_FALSE(query_ok(3.0f, 0x1p41f, 0.1f));
  EXPECT_FALSE(query_ok(3.0f, 0x1p-41f, 0.1f));
  EXPECT_FALSE(query_ok(3.0f, 0.5f, 0x1p-21f));
  EXPECT_FALSE(query_ok(3.0f, 0.5f, NAN));
  {  // a head whose largest element is under 2^-20
    std::vector<float> q(static_cast<size_t>(n_heads * dim), 1.0f);
    std::fill(q.begin() + dim, q.end(), 0x1p-21f);
    EXPECT_FALSE(QuantizeIndexerQuery(q.data(), w.data(), n_heads, dim, 0.1f, qq));
  }
  const int64_t tile = IndexerInt16TileKeys();
  std::vector<int16_t> tiles(static_cast<size_t>(IndexerInt16KeyElements(3, dim)));
  std::vector<float> key_scale(static_cast<size_t>(tile)), abs_sum(static_cast<size_t>(tile));
  const IndexerKeyQuant kq{tiles.data(), key_scale.data(), abs_sum.data()};
  const std::vector<int32_t> rows = {0, 1, 2};
  for (float bad : {NAN, INFINITY, -0x1p21f}) {
    std::vector<float> keys(static_cast<size_t>(3 * dim), 0.25f);
    keys[size_t(2 * dim + 1)] = bad;
    EXPECT_FALSE(QuantizeIndexerKeys(keys.data(), rows.data(), dim, 0, 3, true, kq)) << bad;
  }
  std::vector<float> keys(static_cast<size_t>(3 * dim), 0.25f);
  std::fill(keys.begin() + dim, keys.begin() + 2 * dim, 0.0f);  // an all-zero key is fine
  EXPECT_TRUE(QuantizeIndexerKeys(keys.data(), rows.data(), dim, 0, 3, true, kq));
  EXPECT_EQ(key_scale[1], 0.0f);
  EXPECT_EQ(abs_sum[1], 0.0f);
}

}  // namespace
}  // namespace anymoe::kernels
