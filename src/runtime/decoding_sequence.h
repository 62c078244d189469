// One request's decoding, step by step: the only code that feeds a prompt,
// drafts, verifies drafts, rolls a sequence back and stops it. The generation
// loop (runtime/generator.h: `run`, `chat`, `bench`) and the serving scheduler
// (runtime/scheduler.h) both drive sequences through this type and differ
// only in what they batch: the generator runs one sequence per forward pass,
// the scheduler many. Per step the caller
//   1. asks for the step's tokens: PrefillTokens(n) (a prompt chunk) or, once
//      the prompt is in, DecodeTokens(room, row_share) (the last token and the
//      drafts worth their rows);
//   2. runs the forward pass, with all_logits() for this sequence's rows;
//   3. hands the rows back to Consume, which samples, judges the drafts,
//      streams the tokens to a TokenSink, applies the stop rules and rolls
//      the caches back past the first rejected draft;
//   4. with --spec mtp, runs the MTP layer step Consume asked for
//      (mtp_settle(); MtpDrafter batches them across sequences).
//
// Rollback is one function (RollBack): the trunk's KV cache is truncated to
// the committed tokens and the MTP layer's cache follows it. A recurrent state
// (e.g. a KDA layer) would implement the same call as restore-the-step's-
// checkpoint and replay the accepted rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "models/kv_cache.h"
#include "runtime/generator.h"
#include "runtime/speculative.h"
#include "runtime/token_decoder.h"

namespace anymoe {

class Backend;
class ConstraintState;
class Tensor;
class Tokenizer;

// Where a sequence's tokens go, in order, as Consume produces them.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // A row of logits as the model produced it (`run --record-logits`).
  virtual void OnRow(std::span<const float> logits) { (void)logits; }
  // The same row after the logit guard and logit_bias: the distribution the
  // request samples from, before any constraint (where logprobs are read).
  virtual void OnPrepared(std::span<const float> logits) { (void)logits; }
  // Each emitted token; false cancels the sequence (StopReason::kCancelled).
  virtual bool OnToken(const DecodedToken& token) = 0;
};

// An MTP layer step a verify step asks for (runtime/mtp_drafter.h): append
// the step's settled rows to the MTP cache, then draft up to max_draft tokens
// into `draft`.
struct MtpSettle {
  KvCache* cache = nullptr;
  int64_t first = 0;          // position of the first settled row (== cache->length())
  int64_t hidden_row = 0;     // its row in the step's hidden states
  std::vector<int32_t> next;  // the token after each settled row
  int64_t max_draft = 0;
  std::vector<int32_t>* draft = nullptr;
};

class DecodingSequence {
 public:
  // `prompt` (whole; `prefilled` of its tokens are in `cache` already),
  // `options` (its spec is ignored for `spec`), `constraint` and `tokenizer`
  // (may be null) must outlive the sequence; the caches are attached later
  // (AttachCaches) because a scheduler makes them at admission. `context`:
  // tokens the sequence may hold; `step_tokens`: the most a forward step
  // takes (Model::max_step_tokens), which bounds the MTP layer's drafts.
  DecodingSequence(std::span<const int32_t> prompt, int64_t prefilled,
                   const GenerateOptions& options, const SpeculativeOptions& spec,
                   ConstraintState* constraint, const Tokenizer* tokenizer, int64_t context,
                   int64_t step_tokens);

  // The trunk's cache and, with --spec mtp, the MTP layer's (else null).
  void AttachCaches(KvCache* cache, KvCache* mtp_cache) {
    cache_ = cache;
    mtp_cache_ = mtp_cache;
  }
  // Prompt tokens found in the cache after construction (a prefix cache).
  void set_prefilled(int64_t n) { prefilled_ = n; }

  bool mtp() const { return spec_.kind == SpecKind::kMtp; }
  int64_t prefilled() const { return prefilled_; }
  int64_t prompt_left() const { return prompt_size_ - prefilled_; }
  // Prompt and generated tokens; all but the last are in the cache between
  // steps (the last too when it was an accepted draft that ended the sequence).
  const std::vector<int32_t>& history() const { return history_; }
  int64_t generated() const { return decoder_.generated(); }
  std::optional<StopReason> stop() const { return stop_; }
  bool done() const { return stop_.has_value(); }
  int64_t drafted() const { return drafted_; }
  int64_t accepted() const { return accepted_; }
  int64_t decode_steps() const { return decode_steps_; }
  // Rows fed again after partial accepts on a recurrent model (the cost of
  // its rollback by replay).
  int64_t replayed() const { return replayed_; }
  // Committed tokens the next decode step feeds before the last one (a
  // recurrent model's replay after a partial accept): the step's rows are
  // pending_replay() + 1 + its drafts.
  int64_t pending_replay() const {
    return prompt_left() > 0 || cache_ == nullptr
               ? 0
               : std::max<int64_t>(int64_t(history_.size()) - 1 - cache_->length(), 0);
  }
  // Of this step's rows, those replayed (before the last token).
  int64_t replayed_this_step() const { return replay_; }
  // The text held back for a stop string; returned once, at the end.
  std::string Flush() { return decoder_.Flush(); }
  const TextStream& text() const { return decoder_.text(); }

  // This step's tokens: the next `n` prompt tokens (at least 1, at most
  // prompt_left()).
  std::span<const int32_t> PrefillTokens(int64_t n);
  // This step's tokens past the prompt: the last token and at most `room`
  // drafts, as many as the governor finds worth a row that costs `row_share`
  // of the step's average (0: free). Calls the spec's on_draft.
  std::span<const int32_t> DecodeTokens(int64_t room, double row_share);
  // Whether the forward pass must return logits for every row of the step.
  bool all_logits() const { return !draft_.empty() || (mtp() && step_is_prompt_); }

  // The step's rows: `logits` rows from `row` on (one per token of the step
  // with all_logits(), else one) read through `scratch` (vocab floats).
  // `row_share`: what a row of the next step costs (MTP drafts are made
  // now). An error fails this sequence only; the caches are rolled back.
  Status Consume(Backend& backend, const Tensor& logits, int64_t row, std::span<float> scratch,
                 TokenSink& sink, double row_share = 0);
  // The MTP layer step the last Consume asks for (rows of the same hidden
  // states as its logits, from the same `row`), or null.
  MtpSettle* mtp_settle() { return settle_.cache != nullptr ? &settle_ : nullptr; }

 private:
  // Tokens of history_ whose keys and values the trunk's cache keeps.
  int64_t cached_tokens() const { return int64_t(history_.size()) - (last_cached_ ? 0 : 1); }
  bool recurrent() const { return cache_->pool().state_floats() > 0; }
  // Drafts the sequence may make now: within its token budget, its context,
  // `room` and what the governor allows.
  int64_t DraftLength(int64_t room, double row_share);
  // The rows of the step after row `judged - 1` are dropped.
  void RollBack();
  // Asks for the MTP step of the `judged` settled rows, each followed by the
  // next fed token, the last by `next`.
  void AskMtpSettle(int64_t judged, int32_t next, int64_t max_draft, int64_t hidden_row);

  std::span<const int32_t> prompt_;
  int64_t prompt_size_;
  int64_t prefilled_;
  int64_t context_;
  int64_t step_tokens_;
  int64_t max_new_tokens_;
  SpeculativeOptions spec_;
  DraftGovernor governor_;
  TokenDecoder decoder_;
  KvCache* cache_ = nullptr;
  KvCache* mtp_cache_ = nullptr;

  std::vector<int32_t> history_;
  bool last_cached_ = false;
  std::vector<int32_t> draft_;      // this step's drafts
  std::vector<int32_t> fed_;        // this step's tokens
  std::vector<int32_t> mtp_draft_;  // drafted by the MTP layer for the next step
  bool step_is_prompt_ = false;
  int64_t step_first_ = 0;  // position of this step's first row
  MtpSettle settle_;
  std::optional<StopReason> stop_;
  int64_t drafted_ = 0, accepted_ = 0, decode_steps_ = 0, replayed_ = 0;
  int64_t replay_ = 0;  // this step's replayed rows (before the last token)
};

}  // namespace anymoe
