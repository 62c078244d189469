// A persistent pool of worker threads for data-parallel kernels. Workers are
// created once and spin briefly before sleeping, so the per-op dispatch cost in
// the decode loop is a few hundred nanoseconds, not a thread creation.
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
  // `num_threads` counts the calling thread: 1 means no workers.
  explicit ThreadPool(int num_threads);
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

 private:
  void WorkerLoop(int thread_index);
  void RunTasks(int thread_index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};
  int64_t num_tasks_ = 0;
  const FunctionRef<void(int64_t, int)>* task_ = nullptr;
  bool stop_ = false;
};

}  // namespace anymoe
