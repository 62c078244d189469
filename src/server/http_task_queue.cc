#include "server/http_task_queue.h"

namespace anymoe {
namespace {
thread_local bool t_overflow = false;
}  // namespace

HttpTaskQueue::HttpTaskQueue(size_t threads, size_t max_pending) {
  threads = threads > 0 ? threads : 1;
  main_.capacity = threads + (max_pending > 0 ? max_pending : 1);
  overflow_.capacity = kOverflowThreads + kMaxOverflowPending;
  for (size_t i = 0; i < threads; ++i) {
    main_.threads.emplace_back([this] { Work(main_, false); });
  }
  for (size_t i = 0; i < kOverflowThreads; ++i) {
    overflow_.threads.emplace_back([this] { Work(overflow_, true); });
  }
}

HttpTaskQueue::~HttpTaskQueue() { shutdown(); }

bool HttpTaskQueue::OnOverflowThread() { return t_overflow; }

void HttpTaskQueue::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  space_ready_.wait(lock, [&] { return main_.has_room() || overflow_.has_room() || stopping_; });
  Pool& pool = main_.has_room() || stopping_ ? main_ : overflow_;
  pool.pending.push_back(std::move(fn));
  lock.unlock();
  pool.work_ready.notify_one();
}

void HttpTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && main_.threads.empty()) return;
    stopping_ = true;
  }
  for (Pool* pool : {&main_, &overflow_}) pool->work_ready.notify_all();
  space_ready_.notify_all();
  for (Pool* pool : {&main_, &overflow_}) {
    for (std::thread& t : pool->threads) t.join();
    pool->threads.clear();
  }
}

void HttpTaskQueue::Work(Pool& pool, bool overflow) {
  t_overflow = overflow;
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      pool.work_ready.wait(lock, [&] { return !pool.pending.empty() || stopping_; });
      if (pool.pending.empty()) return;  // stopping, nothing left
      fn = std::move(pool.pending.front());
      pool.pending.pop_front();
      ++pool.active;
    }
    fn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pool.active;
    }
    space_ready_.notify_all();
  }
}

}  // namespace anymoe
