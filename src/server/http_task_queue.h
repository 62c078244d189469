// The HTTP server's worker pool: a fixed number of threads, each serving one
// connection at a time, and a bounded backlog of accepted connections. When the
// backlog is full, connections go to a small overflow pool whose only job is a
// clear answer: the server's pre-routing handler sees OnOverflowThread() and
// replies 503 "too many connections" and closes. When that pool's backlog is
// full as well the accept loop waits, so excess clients queue in the kernel
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
  static constexpr size_t kOverflowThreads = 2;
  static constexpr size_t kMaxOverflowPending = 64;

  HttpTaskQueue(size_t threads, size_t max_pending);
  ~HttpTaskQueue() override;

  // Queues a connection; to the overflow pool when the backlog is full, and
  // blocks while both are full.
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins

  // True on an overflow thread: the connection being served is over the limit.
  static bool OnOverflowThread();

 private:
  // One pool of threads over one bounded queue. `capacity` counts the
  // connections being served plus those waiting for a thread.
  struct Pool {
    std::condition_variable work_ready;
    std::deque<std::function<void()>> pending;
    size_t active = 0;
    size_t capacity = 1;
    std::vector<std::thread> threads;
    bool has_room() const { return active + pending.size() < capacity; }
  };
  void Work(Pool& pool, bool overflow);

  std::mutex mu_;
  std::condition_variable space_ready_;
  Pool main_, overflow_;
  bool stopping_ = false;
};

}  // namespace anymoe
