#include "server/event_channel.h"

namespace anymoe {

void EventChannel::Push(const RequestEvent& event, size_t choice) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({event, std::chrono::steady_clock::now(), choice});
    if (event.kind != RequestEvent::Kind::kToken && ends_left_ > 0 && --ends_left_ == 0) {
      ended_ = true;
    }
    if (unwritten_ != nullptr && !counted_ && !closed_) {
      unwritten_->Enter();
      counted_ = true;
    }
  }
  cv_.notify_one();
}

bool EventChannel::Take(std::chrono::milliseconds timeout, std::deque<TimedEvent>* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty()) Uncount();
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return ended_;
}

void EventChannel::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  Uncount();
}

void EventChannel::Uncount() {
  if (!counted_) return;
  unwritten_->Leave();
  counted_ = false;
}

}  // namespace anymoe
