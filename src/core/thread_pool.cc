#include "core/thread_pool.h"

#include <algorithm>

namespace anymoe {
namespace {

// How long a worker spins on the generation counter before sleeping: long
// enough to bridge the gap between consecutive ops of one forward pass.
constexpr int kSpinIterations = 1 << 16;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  const int workers = std::max(0, num_threads - 1);
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunTasks(int thread_index) {
  for (;;) {
    const int64_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= num_tasks_) break;
    (*task_)(i, thread_index);
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_) return;
    RunTasks(thread_index);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> task) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  task_ = &task;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    // Taking the lock orders the increment with a worker about to sleep.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  RunTasks(0);
  while (busy_workers_.load(std::memory_order_acquire) != 0) CpuRelax();
}

void ThreadPool::ParallelRange(int64_t n, int64_t grain,
                               FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // A few chunks per thread balance uneven rows without much dispatch overhead.
  const int64_t max_chunks = int64_t(num_threads()) * 4;
  const int64_t chunks = std::clamp<int64_t>(n / grain, 1, max_chunks);
  const int64_t per = (n + chunks - 1) / chunks;
  ParallelFor(chunks, [&](int64_t c, int thread) {
    const int64_t begin = c * per;
    const int64_t end = std::min(n, begin + per);
    if (begin < end) fn(begin, end, thread);
  });
}

}  // namespace anymoe
