// Sampler: greedy is argmax, the same seed gives the same draws, and each
// truncation rule (top-k, top-p, min-p, repetition penalty) removes exactly the
// tokens it should.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace anymoe {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, 0.5f, 2.9f, -1.0f}; }

std::set<int32_t> Draws(SamplingParams p, int n, std::vector<int32_t> history = {}) {
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) {
    auto l = Logits();
    seen.insert(s.Sample(l, history));
  }
  return seen;
}

SamplingParams Plain(float temp) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  return p;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(SamplingParams::Greedy());
  auto l = Logits();
  EXPECT_EQ(s.Sample(l, {}), 1);
  std::vector<float> tie = {0.0f, 5.0f, 5.0f};
  EXPECT_EQ(Sampler::Argmax(tie), 1);
}

// Over a vocabulary-sized row (many lanes of the vectorised search): the
// largest wins wherever it is, ties go to the lowest id across lanes, and a
// row of -inf gives id 0.
TEST(Sampler, ArgmaxOverALongRow) {
  std::vector<float> row(49152 + 7);
  for (size_t i = 0; i < row.size(); ++i) row[i] = float(i % 1000) * 1e-3f - 2.0f;
  row[40000] = 5.0f;
  EXPECT_EQ(Sampler::Argmax(row), 40000);
  row[21] = 5.0f;  // another lane, lower id
  EXPECT_EQ(Sampler::Argmax(row), 21);
  row[5] = 5.0f;   // same value again, lower still
  EXPECT_EQ(Sampler::Argmax(row), 5);
  row[row.size() - 1] = 6.0f;  // in the tail past the last whole chunk
  EXPECT_EQ(Sampler::Argmax(row), int32_t(row.size() - 1));
  std::fill(row.begin(), row.end(), -INFINITY);
  EXPECT_EQ(Sampler::Argmax(row), 0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  auto run = [](uint64_t seed) {
    SamplingParams p = Plain(1.5f);
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = Logits();
      out.push_back(s.Sample(l, {}));
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  SamplingParams p = Plain(5.0f);
  p.top_k = 2;
  EXPECT_EQ(Draws(p, 400), (std::set<int32_t>{1, 4}));
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  // At temperature 1 the probabilities of ids 1 and 4 are ~0.37 and ~0.33.
  SamplingParams p = Plain(1.0f);
  p.top_p = 0.5f;
  EXPECT_EQ(Draws(p, 400), (std::set<int32_t>{1, 4}));
}

TEST(Sampler, MinPDropsTokensFarBelowTheBest) {
  SamplingParams p = Plain(1.0f);
  p.min_p = 0.3f;  // keeps p >= 0.3 * p(best): ids 1, 4, 2 (exp(-1) = 0.37)
  EXPECT_EQ(Draws(p, 600), (std::set<int32_t>{1, 2, 4}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = SamplingParams::Greedy();
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  auto l = Logits();
  const std::vector<int32_t> history = {1, 1, 5};
  EXPECT_EQ(s.Sample(l, history), 4);  // 3.0 -> 1.5, so 2.9 wins
  EXPECT_FLOAT_EQ(l[1], 1.5f);         // penalised once despite two occurrences
  EXPECT_FLOAT_EQ(l[5], -2.0f);
}

TEST(Sampler, HighTemperatureReachesEveryToken) {
  EXPECT_EQ(Draws(Plain(50.0f), 2000).size(), Logits().size());
}

// Issue 20, defect 1: a tiny positive temperature (1.4e-45 .. 6e-38 is
// accepted by the API's [0, 2] range) made 1/T overflow to inf, the scaled
// logits inf - inf = NaN, and the least likely token came out. Any T > 0
// must sample from a valid distribution; a tiny one is greedy in effect.
TEST(Sampler, TinyTemperatureIsGreedyNotGarbage) {
  for (float temp : {1.4e-45f, 1e-39f, 6e-38f, 1e-30f, 1e-7f}) {
    SCOPED_TRACE(temp);
    SamplingParams p = Plain(temp);
    EXPECT_EQ(Draws(p, 50), (std::set<int32_t>{1}));
    p.top_k = 3;
    p.top_p = 0.9f;
    p.min_p = 0.1f;
    EXPECT_EQ(Draws(p, 50), (std::set<int32_t>{1}));
  }
  // Two tokens tied for the best stay both possible at a tiny temperature.
  SamplingParams p = Plain(1e-39f);
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> tie = {0.0f, 5.0f, 5.0f, 4.999f};
    seen.insert(s.Sample(tie, {}));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2}));
}

// Dividing (logit - max) by T gives the same distribution as before at
// ordinary temperatures: the two leading tokens of Logits() at T = 1 have
// probabilities 0.37 : 0.33, so their draw counts agree to a few percent.
TEST(Sampler, OrdinaryTemperatureKeepsTheSoftmaxRatios) {
  SamplingParams p = Plain(1.0f);
  Sampler s(p);
  int counts[6] = {};
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    auto l = Logits();
    ++counts[s.Sample(l, {})];
  }
  const std::vector<float> l = Logits();
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  for (int id = 0; id < 6; ++id) {
    const double expected = std::exp(double(l[size_t(id)])) / z;
    EXPECT_NEAR(double(counts[id]) / kDraws, expected, 0.015) << id;
  }
}

}  // namespace
}  // namespace anymoe
