#include "core/thread_pool.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/numa.h"

namespace anymoe {
namespace {

// How long a worker spins on the claim word before sleeping: long enough to
// bridge the gap between consecutive ops of one forward pass.
constexpr int kSpinIterations = 1 << 16;

// How long the caller spins on a worker's last task before yielding its core.
constexpr int kWaitSpins = 1 << 12;

constexpr int kIndexBits = 16;
constexpr int64_t kMaxTasksPerRegion = (int64_t(1) << kIndexBits) - 1;
constexpr uint64_t kIndexMask = (uint64_t(1) << kIndexBits) - 1;

uint64_t Generation(uint64_t claim) { return claim >> (2 * kIndexBits); }
uint64_t Count(uint64_t claim) { return (claim >> kIndexBits) & kIndexMask; }
uint64_t Index(uint64_t claim) { return claim & kIndexMask; }
uint64_t ClaimWord(uint64_t generation, uint64_t count) {
  return (generation << (2 * kIndexBits)) | (count << kIndexBits);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::vector<int> thread_cpus)
    : thread_cpus_(std::move(thread_cpus)) {
  const int workers = std::max(0, num_threads - 1);
  CHECK(thread_cpus_.empty() || thread_cpus_.size() >= size_t(workers) + 1);
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this, i] {
      if (!thread_cpus_.empty()) PinThisThread(thread_cpus_[size_t(i) + 1]);
      WorkerLoop(i + 1);
    });
  }
}

void ThreadPool::PinCaller() {
  pinned_caller_ = std::this_thread::get_id();
  PinThisThread(thread_cpus_[0]);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    claim_.store(ClaimWord(++generation_, 0));
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunTasks(uint64_t generation, int thread_index) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (Generation(c) == generation && Index(c) < Count(c)) {
    // Success proves the region is still current, so task_ and first_task_ are its own.
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acquire)) continue;
    (*task_)(first_task_ + int64_t(Index(c)), thread_index);
    done_.fetch_add(1, std::memory_order_release);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    for (int spin = 0; Generation(c) == seen && spin < kSpinIterations &&
                       !park_.load(std::memory_order_relaxed);
         ++spin) {
      CpuRelax();
      c = claim_.load(std::memory_order_acquire);
    }
    if (Generation(c) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return Generation(claim_.load()) != seen; });
      sleepers_.fetch_sub(1);
      c = claim_.load(std::memory_order_acquire);
    }
    if (stop_.load()) return;
    seen = Generation(c);
    RunTasks(seen, thread_index);
  }
}

void ThreadPool::RunRegion(int64_t first, int64_t num_tasks,
                           FunctionRef<void(int64_t, int)> task) {
  task_ = &task;
  first_task_ = first;
  park_.store(false, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = ++generation_;
  // seq_cst store then load: either a worker about to sleep sees the new
  // region, or this thread sees it sleeping and wakes it.
  claim_.store(ClaimWord(generation, uint64_t(num_tasks)));
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  RunTasks(generation, 0);
  // Every task is claimed now; wait only for those workers are still running.
  // Yielding after a short spin lets a preempted worker finish sooner when the
  // machine has more runnable threads than cores.
  for (int spin = 0; done_.load(std::memory_order_acquire) < num_tasks; ++spin) {
    if (spin < kWaitSpins) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks, FunctionRef<void(int64_t, int)> task) {
  if (num_tasks <= 0) return;
  if (!thread_cpus_.empty() && pinned_caller_ != std::this_thread::get_id()) PinCaller();
  if (workers_.empty() || num_tasks == 1) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  for (int64_t first = 0; first < num_tasks; first += kMaxTasksPerRegion) {
    RunRegion(first, std::min(kMaxTasksPerRegion, num_tasks - first), task);
  }
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
