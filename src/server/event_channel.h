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
#include "server/request_tracker.h"

namespace anymoe {

struct TimedEvent {
  RequestEvent event;
  std::chrono::steady_clock::time_point at;  // when the scheduler emitted it
  size_t choice = 0;                          // which of the request's n sequences
};

class EventChannel {
 public:
  // With `unwritten`, the channel is counted there from the push of an event
  // until its HTTP thread has written it: the next Take that finds nothing
  // queued, or Close.
  // `sequences`: how many sequences push here (n choices), each ending with
  // one kDone/kError.
  explicit EventChannel(RequestTracker* unwritten = nullptr, size_t sequences = 1)
      : ends_left_(sequences), unwritten_(unwritten) {}
  ~EventChannel() { Close(); }
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  // Scheduler thread.
  void Push(const RequestEvent& event, size_t choice = 0);

  // HTTP thread: moves every queued event into `out` (appending), waiting up to
  // `timeout` for the first. Returns true when the last event (the last
  // sequence's kDone/kError) has been taken, now or before. Called again, it takes the events taken before
  // as written.
  bool Take(std::chrono::milliseconds timeout, std::deque<TimedEvent>* out);

  // HTTP thread: nothing more will be written (the response is over, or its
  // client left); events pushed from now on are not counted.
  void Close();

 private:
  void Uncount();  // with mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TimedEvent> queue_;
  bool ended_ = false;  // every sequence pushed its kDone/kError
  size_t ends_left_;
  RequestTracker* unwritten_;
  bool counted_ = false;  // entered in unwritten_
  bool closed_ = false;
};

}  // namespace anymoe
