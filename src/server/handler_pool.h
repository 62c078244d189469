// The threads that run request handlers: a fixed number, each running one
// request at a time (a streamed generation holds its thread until its last
// event), and a bounded queue of complete requests waiting for one. Reading
// requests never takes a handler thread (the transport reads asynchronously),
// so slow or idle clients cannot occupy them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace anymoe {

class HandlerPool {
 public:
  HandlerPool(size_t threads, size_t max_waiting);
  ~HandlerPool();  // Shutdown()
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `task`; false (and `task` is not run) when every thread is busy and
  // `max_waiting` tasks wait already, or after Shutdown.
  bool TrySubmit(std::function<void()> task);
  // Runs what is queued, then joins the threads.
  void Shutdown();

  size_t busy() const;  // tasks running or waiting

 private:
  void Work();

  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> waiting_;
  size_t running_ = 0;
  size_t capacity_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace anymoe
