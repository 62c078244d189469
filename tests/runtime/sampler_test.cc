// Sampler: greedy is argmax, the same seed gives the same draws, and each
// truncation rule (top-k, top-p, min-p, repetition penalty) removes exactly the
// tokens it should.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace anymoe
