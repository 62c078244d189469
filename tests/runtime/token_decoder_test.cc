// TokenDecoder: the per-token rules `anymoe run` and the server share, in
// their order: a stop token ends the sequence even on the budget's last token
// and adds no text; the budget ends it; a draft is accepted only when it is
// the token decoding would choose; logit_bias shifts the choice; non-finite
// logits are a typed numerical_error.
#include "runtime/token_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace anymoe {
namespace {

GenerateOptions Greedy(int64_t max_new_tokens) {
  GenerateOptions o;
  o.sampling = SamplingParams::Greedy();
  o.max_new_tokens = max_new_tokens;
  return o;
}

// Logits over 8 tokens whose largest is `best`.
std::vector<float> Peaked(int32_t best) {
  std::vector<float> logits(8, 0.0f);
  logits[size_t(best)] = 5.0f;
  return logits;
}

DecodedToken Choose(TokenDecoder& d, int32_t best, int32_t draft = -1) {
  std::vector<float> logits = Peaked(best);
  EXPECT_TRUE(d.Prepare(logits).ok());
  auto t = d.Choose(logits, {}, draft, 100);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : DecodedToken{};
}

TEST(TokenDecoder, StopTokenWinsOverTheBudgetAndAddsNoText) {
  GenerateOptions o = Greedy(1);
  o.stop_tokens = {3};
  TokenDecoder d(o, nullptr, nullptr);
  const DecodedToken t = Choose(d, 3);
  EXPECT_EQ(t.token, 3);
  ASSERT_TRUE(t.stop.has_value());
  EXPECT_EQ(*t.stop, StopReason::kStopToken);
  EXPECT_TRUE(t.text.empty());
  EXPECT_EQ(d.generated(), 1);
}

TEST(TokenDecoder, TheBudgetEndsTheSequence) {
  TokenDecoder d(Greedy(2), nullptr, nullptr);
  EXPECT_FALSE(Choose(d, 1).stop.has_value());
  const DecodedToken last = Choose(d, 2);
  EXPECT_EQ(last.token, 2);
  ASSERT_TRUE(last.stop.has_value());
  EXPECT_EQ(*last.stop, StopReason::kMaxTokens);
}

TEST(TokenDecoder, DraftAcceptedOnlyWhenItIsTheChoice) {
  TokenDecoder d(Greedy(10), nullptr, nullptr);
  const DecodedToken agreed = Choose(d, 4, /*draft=*/4);
  EXPECT_TRUE(agreed.accepted);
  EXPECT_EQ(agreed.token, 4);
  const DecodedToken replaced = Choose(d, 4, /*draft=*/6);
  EXPECT_FALSE(replaced.accepted);
  EXPECT_EQ(replaced.token, 4);
}

TEST(TokenDecoder, LogitBiasIsAppliedByPrepare) {
  GenerateOptions o = Greedy(10);
  o.logit_bias = {{7, 10.0f}};
  TokenDecoder d(o, nullptr, nullptr);
  EXPECT_EQ(Choose(d, 2).token, 7);
}

TEST(TokenDecoder, NonFiniteLogitsAreANumericalError) {
  TokenDecoder d(Greedy(10), nullptr, nullptr);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> logits = Peaked(1);
    logits[5] = bad;
    const Status s = d.Prepare(logits);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.kind(), ErrorKind::kInternal);
    EXPECT_EQ(s.code(), "numerical_error");
    EXPECT_NE(s.message().find("token 5 of 8"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace anymoe
