// The step cost model: a least-squares line through (rows, seconds) of recent
// steps, and the share of a step its per-row part takes.
#include "runtime/step_cost.h"

#include <gtest/gtest.h>

#include <random>

namespace anymoe {
namespace {

// Steps of 1-40 rows at 10 ms + 0.5 ms a row, with 5 % noise: the fit finds
// both parts, and the row share follows from them.
TEST(StepCostModel, FitsTheFixedAndPerRowParts) {
  StepCostModel m;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> rows(1, 40);
  std::normal_distribution<double> noise(1.0, 0.05);
  for (int i = 0; i < 400; ++i) {
    const int r = rows(rng);
    m.Observe(r, (0.010 + 0.0005 * r) * noise(rng));
  }
  ASSERT_TRUE(m.valid());
  EXPECT_NEAR(m.fixed_seconds(), 0.010, 0.002);
  EXPECT_NEAR(m.row_seconds(), 0.0005, 0.0001);
  // 20 rows: 10 ms of 20 ms per row.
  EXPECT_NEAR(m.RowShare(20), 0.5, 0.08);
  EXPECT_LT(m.RowShare(1), 0.1);   // one sequence: rows nearly free
  EXPECT_GT(m.RowShare(400), 0.9); // a big batch: rows cost what a token does
}

// Until the steps seen differ in rows (or are too few), nothing can be told
// apart: a draft counts as free, as without the model.
TEST(StepCostModel, NoShareUntilTheRowsVary) {
  StepCostModel m;
  EXPECT_EQ(m.RowShare(8), 0);
  for (int i = 0; i < 100; ++i) m.Observe(16, 0.02);
  EXPECT_FALSE(m.valid());
  EXPECT_EQ(m.RowShare(16), 0);
  m.Observe(0, 1.0);    // ignored: no rows
  m.Observe(4, -1.0);   // ignored: no time
  EXPECT_FALSE(m.valid());
}

// Recent steps weigh more: after the machine gets slower per row, the fit
// follows within a few windows.
TEST(StepCostModel, FollowsAChangeOfCost) {
  StepCostModel m;
  for (int i = 0; i < 300; ++i) m.Observe(1 + i % 30, 0.010 + 0.0001 * (1 + i % 30));
  const double before = m.row_seconds();
  for (int i = 0; i < 300; ++i) m.Observe(1 + i % 30, 0.010 + 0.001 * (1 + i % 30));
  EXPECT_NEAR(before, 0.0001, 2e-5);
  EXPECT_NEAR(m.row_seconds(), 0.001, 1e-4);
}

}  // namespace
}  // namespace anymoe
