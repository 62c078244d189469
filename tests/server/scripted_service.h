// A stand-in for the scheduler that "generates" fixed text in small pieces
// (what a real model writes after its generation prompt), so server and page
// tests see exact, known replies. Several scripts are used in turn, one per
// request; the prompts it was given are kept.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/completion_service.h"

namespace anymoe::testing {

class ScriptedService final : public CompletionService {
 public:
  ScriptedService(std::string text, size_t piece) : ScriptedService(std::vector{text}, piece) {}
  ScriptedService(std::vector<std::string> scripts, size_t piece)
      : scripts_(std::move(scripts)), piece_(piece) {}

  Expected<std::shared_ptr<RequestHandle>> Submit(Request request) override {
    std::string text;
    {
      std::lock_guard lock(mutex_);
      text = scripts_[prompts_.size() % scripts_.size()];
      prompts_.push_back(request.prompt);
    }
    for (size_t i = 0; i < text.size(); i += piece_) {
      RequestEvent token;
      token.kind = RequestEvent::Kind::kToken;
      token.token = 5;
      token.text = text.substr(i, piece_);
      request.on_event(token);
    }
    RequestEvent done;
    done.kind = RequestEvent::Kind::kDone;
    done.reason = StopReason::kStopToken;
    request.on_event(done);
    return std::make_shared<RequestHandle>();
  }
  SchedulerStats stats() const override { return {}; }
  RoutingStats routing_stats() const override { return {}; }
  void Shutdown(std::chrono::steady_clock::time_point) override {}

  // The prompt tokens of each request, in order.
  std::vector<std::vector<int32_t>> prompts() const {
    std::lock_guard lock(mutex_);
    return prompts_;
  }

 private:
  std::vector<std::string> scripts_;
  size_t piece_;
  mutable std::mutex mutex_;
  std::vector<std::vector<int32_t>> prompts_;
};

}  // namespace anymoe::testing
