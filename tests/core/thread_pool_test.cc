#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace anymoe {
namespace {

// Every index runs exactly once, whatever the pool size and task count.
TEST(ThreadPoolTest, RunsEveryTaskOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 17, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t i, int thread) {
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, threads);
        hits[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
    }
  }
}

// Regions larger than one claim word holds are split, not truncated.
TEST(ThreadPoolTest, RunsMoreTasksThanOneRegionHolds) {
  ThreadPool pool(2);
  const int64_t n = 200000;
  std::vector<std::atomic<uint8_t>> hits(static_cast<size_t>(n));
  pool.ParallelFor(n, [&](int64_t i, int) { hits[size_t(i)].fetch_add(1); });
  int64_t once = 0;
  for (auto& h : hits) once += h.load() == 1;
  EXPECT_EQ(once, n);
}

// Back-to-back regions never mix: a late worker must not run a task of an
// earlier region with a later region's function (or twice).
TEST(ThreadPoolTest, ConsecutiveRegionsStaySeparate) {
  ThreadPool pool(3);
  std::vector<int64_t> sums(2000, 0);
  for (size_t r = 0; r < sums.size(); ++r) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(int64_t(r % 7) + 2, [&](int64_t i, int) { sum.fetch_add(int64_t(r) * 100 + i); });
    sums[r] = sum.load();
  }
  for (size_t r = 0; r < sums.size(); ++r) {
    const int64_t n = int64_t(r % 7) + 2;
    EXPECT_EQ(sums[r], int64_t(r) * 100 * n + n * (n - 1) / 2) << r;
  }
}

// A worker stuck in one task does not hold the rest of the region hostage: the
// caller claims and finishes the other tasks meanwhile (a static split would hang).
TEST(ThreadPoolTest, CallerDoesNotWaitForAStalledWorker) {
  ThreadPool pool(2);
  std::atomic<bool> release{false};
  std::atomic<int> stalled_thread{-1};
  std::atomic<int64_t> ran{0};
  pool.ParallelFor(64, [&](int64_t, int thread) {
    if (thread != 0 && stalled_thread.exchange(thread) == -1) {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ran.fetch_add(1);
    if (ran.load() == 63) release.store(true);  // all but the stalled task done by the caller
  });
  EXPECT_EQ(ran.load(), 64);
}

// Whether a worker (not the caller) runs a task within 50 regions of 64 slow tasks.
bool AWorkerJoins(ThreadPool& pool) {
  std::atomic<int> workers_seen{0};
  for (int attempt = 0; attempt < 50 && workers_seen.load() == 0; ++attempt) {
    pool.ParallelFor(64, [&](int64_t, int thread) {
      if (thread != 0) workers_seen.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  }
  return workers_seen.load() > 0;
}

// Workers go to sleep when idle and wake for the next region.
TEST(ThreadPoolTest, WakesAfterIdle) {
  ThreadPool pool(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(AWorkerJoins(pool));
}

// Park sends spinning workers to sleep at once; the next regions still run
// every task, and the workers come back for them.
TEST(ThreadPoolTest, ParkedWorkersComeBackForTheNextRegion) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    pool.Park();
    if (round % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::vector<std::atomic<int>> hits(37);
    pool.ParallelFor(37, [&](int64_t i, int) { hits[size_t(i)].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "round " << round;
  }
  pool.Park();
  EXPECT_TRUE(AWorkerJoins(pool));
}

}  // namespace
}  // namespace anymoe
