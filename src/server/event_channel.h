// Hands a request's events from the scheduler thread to the HTTP thread that
// writes its response. The scheduler side never blocks (one short lock per
// event); the HTTP side waits with a timeout so it can check the client's
// socket between events.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "runtime/scheduler.h"

namespace anymoe {

struct TimedEvent {
  RequestEvent event;
  std::chrono::steady_clock::time_point at;  // when the scheduler emitted it
};

class EventChannel {
 public:
  // Scheduler thread.
  void Push(const RequestEvent& event);

  // HTTP thread: moves every queued event into `out` (appending), waiting up to
  // `timeout` for the first. Returns true when the last event (kDone/kError) has
  // been taken, now or before.
  bool Take(std::chrono::milliseconds timeout, std::deque<TimedEvent>* out);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TimedEvent> queue_;
  bool ended_ = false;  // a kDone/kError was pushed
};

}  // namespace anymoe
