// Counts things in flight so that a thread can wait until none is left:
// generation requests between arrival and the last byte of their response (a
// drain waits until every response has been flushed), or responses with events
// not yet written (the scheduler waits for those writes between steps).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace anymoe {

class RequestTracker {
 public:
  void Enter() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
  }
  void Leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --count_;
    }
    cv_.notify_all();
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  // True when the count reached zero before `deadline`.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return count_ == 0; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

}  // namespace anymoe
