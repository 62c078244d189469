// What the HTTP layer needs from the continuous-batching scheduler
// (runtime/scheduler.h): submit a request, read load statistics, drain. An
// interface so the server's queueing, disconnect and drain behaviour can be
// tested against a scripted stand-in as well as the real scheduler.
#pragma once

#include <chrono>
#include <memory>

#include "runtime/scheduler.h"

namespace anymoe {

class CompletionService {
 public:
  virtual ~CompletionService() = default;
  // Same contract as Scheduler::Submit: never blocks; `on_event` runs on the
  // service's thread; errors are one line (a full queue says "queue full").
  virtual Expected<std::shared_ptr<RequestHandle>> Submit(Request request) = 0;
  virtual SchedulerStats stats() const = 0;
  // Per-layer expert counts, snapshotted between steps (empty for dense models).
  virtual RoutingStats routing_stats() const = 0;
  // Scheduler::ChangeModel and model_version (a live expert swap); a service
  // without a model to change refuses.
  virtual Expected<uint64_t> ChangeModel(std::function<Status(Model&)> change) {
    (void)change;
    return Status::Error("this service cannot change its model", ErrorKind::kInvalidArgument,
                         "swap_unsupported");
  }
  virtual uint64_t model_version() const { return 0; }
  // Stops accepting, lets running requests finish until `deadline`, cancels the rest.
  virtual void Shutdown(std::chrono::steady_clock::time_point deadline) = 0;
};

// The real thing: requests run on `scheduler`.
std::unique_ptr<CompletionService> SchedulerService(std::unique_ptr<Scheduler> scheduler);

}  // namespace anymoe
