#include "server/http_task_queue.h"

namespace anymoe {

HttpTaskQueue::HttpTaskQueue(size_t threads, size_t max_pending)
    : max_pending_(max_pending > 0 ? max_pending : 1) {
  threads_.reserve(threads);
  for (size_t i = 0; i < (threads > 0 ? threads : 1); ++i)
    threads_.emplace_back([this] { Work(); });
}

HttpTaskQueue::~HttpTaskQueue() { shutdown(); }

void HttpTaskQueue::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  space_ready_.wait(lock, [&] { return pending_.size() < max_pending_ || stopping_; });
  pending_.push_back(std::move(fn));
  lock.unlock();
  work_ready_.notify_one();
}

void HttpTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  work_ready_.notify_all();
  space_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void HttpTaskQueue::Work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [&] { return !pending_.empty() || stopping_; });
      if (pending_.empty()) return;  // stopping, nothing left
      fn = std::move(pending_.front());
      pending_.pop_front();
    }
    space_ready_.notify_one();
    fn();
  }
}

}  // namespace anymoe
