#include "runtime/step_broadcast.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "models/kv_cache.h"

namespace anymoe {
namespace {

enum Kind : int32_t { kStep = 1, kHeartbeat = 2, kStop = 3 };

// Sent first, fixed size; the step's int32 payload follows when `ints` > 0:
// per sequence [tokens, all_logits, length, blocks], then every sequence's
// token ids and block ids in that order.
struct Header {
  int32_t kind = 0;
  int32_t steps = 0;
  int64_t ints = 0;
  int64_t pool_blocks = 0;
};
constexpr int64_t kPerStep = 4;

std::span<uint8_t> Bytes(Header& h) { return {reinterpret_cast<uint8_t*>(&h), sizeof(h)}; }
std::span<uint8_t> Bytes(std::vector<int32_t>& v) {
  return {reinterpret_cast<uint8_t*>(v.data()), v.size() * sizeof(int32_t)};
}

}  // namespace

Status StepSender::Broadcast(int32_t kind, std::span<const Model::SequenceStep> steps) {
  payload_.clear();
  for (const Model::SequenceStep& s : steps) {
    payload_.insert(payload_.end(), {int32_t(s.tokens.size()), int32_t(s.all_logits),
                                     int32_t(s.cache->length()), int32_t(s.cache->blocks())});
  }
  for (const Model::SequenceStep& s : steps) {
    payload_.insert(payload_.end(), s.tokens.begin(), s.tokens.end());
    const auto blocks = s.cache->block_ids();
    payload_.insert(payload_.end(), blocks.begin(), blocks.end());
  }
  // The scheduler's pool, which the other ranks' replicas must match.
  const int64_t pool_blocks = steps.empty() ? -1 : steps[0].cache->pool().num_blocks();
  Header h{kind, int32_t(steps.size()), int64_t(payload_.size()), pool_blocks};
  RETURN_IF_ERROR(comm_.Broadcast(Bytes(h), 0));
  if (payload_.empty()) return Status::Ok();
  return comm_.Broadcast(Bytes(payload_), 0);
}

Status StepSender::Send(std::span<const Model::SequenceStep> steps) {
  return Broadcast(kStep, steps);
}
Status StepSender::Heartbeat() { return Broadcast(kHeartbeat, {}); }
Status StepSender::Stop() { return Broadcast(kStop, {}); }

Status FollowSteps(Model& model, Communicator& comm, int64_t kv_tokens, int64_t context) {
  ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, model.NewPool(kv_tokens, context));
  const int64_t max_tokens = model.max_step_tokens();
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<Model::SequenceStep> steps;
  std::vector<int32_t> payload;
  for (;;) {
    Header h;
    RETURN_IF_ERROR(comm.Broadcast(Bytes(h), 0));
    if (h.kind == kStop) return Status::Ok();
    if (h.kind == kHeartbeat) continue;
    if (h.pool_blocks != pool->num_blocks()) {
      return Status::Error("expert parallel serving: rank 0's KV pool has " +
                           std::to_string(h.pool_blocks) + " blocks, this rank's " +
                           std::to_string(pool->num_blocks()) +
                           " (every rank needs the same --parallel, --kv-tokens and -c)");
    }
    // Bounds before allocating: each sequence has a token, and the tokens
    // fit one step; each block table fits the pool.
    if (h.kind != kStep || h.steps < 1 || h.steps > max_tokens || h.ints < 0 ||
        h.ints > h.steps * (kPerStep + pool->num_blocks()) + max_tokens) {
      return Status::Error("expert parallel serving: malformed step from rank 0 (kind " +
                           std::to_string(h.kind) + ", " + std::to_string(h.steps) +
                           " sequences, " + std::to_string(h.ints) + " values)");
    }
    payload.resize(size_t(h.ints));
    RETURN_IF_ERROR(comm.Broadcast(Bytes(payload), 0));
    while (caches.size() < size_t(h.steps)) {
      caches.push_back(std::make_unique<KvCache>(pool.get(), context));
    }
    steps.clear();
    size_t at = size_t(h.steps) * kPerStep;
    for (int32_t i = 0; i < h.steps; ++i) {
      const int32_t* meta = payload.data() + size_t(i) * kPerStep;
      const int64_t tokens = meta[0], blocks = meta[3];
      if (tokens < 1 || blocks < 0 || int64_t(at) + tokens + blocks > h.ints) {
        return Status::Error("expert parallel serving: malformed step from rank 0 (sequence " +
                             std::to_string(i) + ")");
      }
      const std::span<const int32_t> ids(payload.data() + at, size_t(tokens));
      at += size_t(tokens);
      RETURN_IF_ERROR(caches[size_t(i)]->Mirror(std::span(payload.data() + at, size_t(blocks)),
                                                meta[2]));
      at += size_t(blocks);
      steps.push_back({ids, caches[size_t(i)].get(), meta[1] != 0});
    }
    // A failed exchange inside the pass ends the job; any other error is
    // rank 0's too (the same pass on the same inputs), which fails the step's
    // requests and goes on.
    auto logits = model.ForwardBatch(steps);
    model.backend().Idle();  // the workers leave the cores while this rank waits
    if (!logits.ok() && comm.failed()) return logits.status();
  }
}

}  // namespace anymoe
