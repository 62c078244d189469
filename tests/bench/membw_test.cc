// The bandwidth probe on a small buffer: every pass is timed and positive (the
// probe also checks each pass's sum of the buffer), and bad options are errors.
#include "bench/membw.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

TEST(Membw, MeasuresEveryPass) {
  for (int threads : {1, 2}) {
    auto r = MeasureReadBandwidth({.threads = threads, .buffer_bytes = 64 << 20, .passes = 3});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->threads, threads);
    EXPECT_EQ(r->buffer_bytes, uint64_t(64) << 20);
    ASSERT_EQ(r->pass_gbs.size(), 3u);
    for (double gbs : r->pass_gbs) EXPECT_GT(gbs, 0.0);
    EXPECT_GE(r->best_gbs(), r->median_gbs());
  }
}

TEST(Membw, RoundsTheBufferUpToWholeChunks) {
  auto r = MeasureReadBandwidth({.threads = 1, .buffer_bytes = 1, .passes = 1});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->buffer_bytes, uint64_t(16) << 20);
}

TEST(Membw, BestAndMedian) {
  MembwResult r;
  EXPECT_EQ(r.best_gbs(), 0.0);
  EXPECT_EQ(r.median_gbs(), 0.0);
  r.pass_gbs = {3, 1, 2};
  EXPECT_EQ(r.best_gbs(), 3.0);
  EXPECT_EQ(r.median_gbs(), 2.0);
  r.pass_gbs = {4, 1, 2, 3};
  EXPECT_EQ(r.median_gbs(), 2.5);
}

TEST(Membw, RejectsBadOptions) {
  EXPECT_FALSE(MeasureReadBandwidth({.threads = 0}).ok());
  EXPECT_FALSE(MeasureReadBandwidth({.threads = 1, .passes = 0}).ok());
  EXPECT_FALSE(MeasureReadBandwidth({.threads = 1, .buffer_bytes = 0}).ok());
}

}  // namespace
}  // namespace anymoe
