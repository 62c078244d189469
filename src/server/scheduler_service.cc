// CompletionService over runtime/scheduler.h: a direct pass-through.
#include "server/completion_service.h"

namespace anymoe {
namespace {

class SchedulerServiceImpl final : public CompletionService {
 public:
  explicit SchedulerServiceImpl(std::unique_ptr<Scheduler> s) : scheduler_(std::move(s)) {}
  Expected<std::shared_ptr<RequestHandle>> Submit(Request request) override {
    return scheduler_->Submit(std::move(request));
  }
  SchedulerStats stats() const override { return scheduler_->stats(); }
  RoutingStats routing_stats() const override { return scheduler_->routing_stats(); }
  Expected<uint64_t> ChangeModel(std::function<Status(Model&)> change) override {
    return scheduler_->ChangeModel(std::move(change));
  }
  uint64_t model_version() const override { return scheduler_->model_version(); }
  void Shutdown(std::chrono::steady_clock::time_point deadline) override {
    scheduler_->Shutdown(deadline);
  }

 private:
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace

std::unique_ptr<CompletionService> SchedulerService(std::unique_ptr<Scheduler> scheduler) {
  return std::make_unique<SchedulerServiceImpl>(std::move(scheduler));
}

}  // namespace anymoe
