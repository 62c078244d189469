// Serving under expert parallelism: rank 0 runs the HTTP server and the
// scheduler; before each forward pass it broadcasts the step's batch (each
// sequence's tokens, KV block table and length) and the other ranks run the
// same pass over a replica of its KV pool, which holds the same bytes because
// every rank writes the same rows. Between steps an idle rank 0 sends a
// heartbeat, so a dead rank 0 is noticed within the exchange timeout.
#pragma once

#include <span>
#include <vector>

#include "core/status.h"
#include "distributed/communicator.h"
#include "models/model.h"

namespace anymoe {

// Rank 0's side. Calls come from one thread at a time.
class StepSender {
 public:
  explicit StepSender(Communicator& comm) : comm_(comm) {}
  // The batch of the forward pass about to run.
  Status Send(std::span<const Model::SequenceStep> steps);
  // Nothing to run: tells the others rank 0 is alive.
  Status Heartbeat();
  // The server stopped: the other ranks leave FollowSteps.
  Status Stop();

 private:
  Status Broadcast(int32_t kind, std::span<const Model::SequenceStep> steps);
  Communicator& comm_;
  std::vector<int32_t> payload_;
};

// The other ranks' side: runs rank 0's steps over a KV pool of `kv_tokens`
// tokens (the scheduler's size) in sequences of `context` tokens, until rank 0
// sends Stop (Ok) or an exchange fails or times out (the error).
Status FollowSteps(Model& model, Communicator& comm, int64_t kv_tokens, int64_t context);

}  // namespace anymoe
