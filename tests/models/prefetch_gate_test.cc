// The prefetch gate opens and closes on the share of read-ahead candidates
// that were used, follows a change of workload, and stays open until it has
// seen enough candidates to judge.
#include "models/experts/prefetch_gate.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

TEST(PrefetchGate, OpenUntilItHasSeenEnoughCandidates) {
  PrefetchGate gate;
  EXPECT_TRUE(gate.open());
  // Nothing used, but fewer candidates than the warm-up: still open.
  gate.Record(uint64_t(PrefetchGate::kWarmup) - 1, 0);
  EXPECT_TRUE(gate.open());
  gate.Record(1, 0);
  EXPECT_FALSE(gate.open());
}

TEST(PrefetchGate, ClosesBelowTheShareAndReopensAboveIt) {
  PrefetchGate gate(0.5);
  // Steps of 8 candidates, 1 used (the bench file's 11 %): closed.
  for (int i = 0; i < 100; ++i) gate.Record(8, 1);
  EXPECT_FALSE(gate.open());
  EXPECT_NEAR(gate.used_share(), 1.0 / 8, 1e-9);
  // The predictor gets good (6 of 8 used): the old evidence decays and the
  // gate reopens within a few half-lives' worth of candidates.
  int steps = 0;
  while (!gate.open() && steps < 1000) gate.Record(8, 6), ++steps;
  EXPECT_TRUE(gate.open());
  EXPECT_GT(steps, 4);  // not on the first good step: the history counts
  EXPECT_LE(steps * 8, 3 * int(PrefetchGate::kDefaultHalfLife));
  // Exactly at the share it is open; just under it, closed.
  PrefetchGate at(0.5);
  for (int i = 0; i < 100; ++i) at.Record(4, 2);
  EXPECT_TRUE(at.open());
  PrefetchGate under(0.5);
  for (int i = 0; i < 100; ++i) under.Record(100, 49);
  EXPECT_FALSE(under.open());
}

TEST(PrefetchGate, StepsWithoutCandidatesChangeNothing) {
  PrefetchGate gate(0.5);
  for (int i = 0; i < 20; ++i) gate.Record(4, 0);
  ASSERT_FALSE(gate.open());
  const double share = gate.used_share();
  for (int i = 0; i < 1000; ++i) gate.Record(0, 0);  // every prediction already cached
  EXPECT_FALSE(gate.open());
  EXPECT_EQ(gate.used_share(), share);
}

}  // namespace
}  // namespace anymoe
