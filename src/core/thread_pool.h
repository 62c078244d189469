// A persistent pool of worker threads for data-parallel kernels. Workers are
// created once and spin briefly before sleeping, so the per-op dispatch cost in
// the decode loop is a few hundred nanoseconds, not a thread creation.
//
// Tasks are claimed one at a time from a single atomic word, and the caller
// waits only for tasks a worker actually claimed: when a worker is descheduled
// (a shared or oversubscribed machine), the caller runs its share instead of
// waiting for it to wake, so a slow worker costs at most one task.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace anymoe {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread: 1 means no workers. With
  // `thread_cpus` (core/numa.h's placement; at least num_threads entries),
  // thread i runs pinned to CPU thread_cpus[i]: workers from their start, a
  // thread calling ParallelFor (index 0) from its first call.
  explicit ThreadPool(int num_threads, std::vector<int> thread_cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return int(workers_.size()) + 1; }

  // Runs task(i, thread_index) for i in [0, num_tasks) across the pool and the
  // calling thread; returns when all are done. Tasks are handed out dynamically.
  // Not reentrant: one ParallelFor at a time, from one thread. Never allocates.
  void ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> task);

  // Splits [0, n) into contiguous ranges, about `grain` items or more each.
  void ParallelRange(int64_t n, int64_t grain,
                     FunctionRef<void(int64_t begin, int64_t end, int thread)> fn);

  // A hint that no region comes for a while (the caller turns to other work):
  // workers sleep now instead of spinning, leaving their cores to other
  // threads. The next region wakes them; until they are up, the caller runs
  // its tasks itself.
  void Park() { park_.store(true, std::memory_order_relaxed); }

 private:
  void RunRegion(int64_t first, int64_t num_tasks, FunctionRef<void(int64_t, int)> task);
  void WorkerLoop(int thread_index);
  // Claims and runs tasks of region `generation` while it has unclaimed ones.
  void RunTasks(uint64_t generation, int thread_index);

  // Pins the calling thread to thread_cpus_[0] once per thread that calls.
  void PinCaller();

  std::vector<int> thread_cpus_;
  std::thread::id pinned_caller_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  // The current region's claim word: generation | task count | next task.
  // Packing all three makes a late worker's compare-and-swap fail unless the
  // task it claims belongs to the region still running.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<int> sleepers_{0};
  uint64_t generation_ = 0;  // written by the caller only
  int64_t first_task_ = 0;   // region's offset into the caller's task range
  const FunctionRef<void(int64_t, int)>* task_ = nullptr;
  std::atomic<bool> stop_{false};
  std::atomic<bool> park_{false};
};

}  // namespace anymoe
