#include "server/handler_pool.h"

namespace anymoe {

HandlerPool::HandlerPool(size_t threads, size_t max_waiting) {
  threads = threads > 0 ? threads : 1;
  capacity_ = threads + max_waiting;
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

HandlerPool::~HandlerPool() { Shutdown(); }

bool HandlerPool::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || running_ + waiting_.size() >= capacity_) return false;
    waiting_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

size_t HandlerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ + waiting_.size();
}

void HandlerPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void HandlerPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [&] { return !waiting_.empty() || stopping_; });
      if (waiting_.empty()) return;  // stopping, nothing left
      task = std::move(waiting_.front());
      waiting_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // release what it holds before counting it done
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
}

}  // namespace anymoe
