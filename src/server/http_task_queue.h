// The HTTP server's worker pool: a fixed number of threads, each serving one
// connection at a time, and a bounded backlog of accepted connections. When the
// backlog is full the accept loop waits, so excess clients queue in the kernel
// instead of in memory (cpp-httplib's default pool queues without bound).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace anymoe {

class HttpTaskQueue final : public httplib::TaskQueue {
 public:
  HttpTaskQueue(size_t threads, size_t max_pending);
  ~HttpTaskQueue() override;

  void enqueue(std::function<void()> fn) override;  // blocks while the backlog is full
  void shutdown() override;                         // runs what is queued, then joins

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable work_ready_, space_ready_;
  std::deque<std::function<void()>> pending_;
  size_t max_pending_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace anymoe
