// Continuous batching: many requests share one forward pass per step. New
// requests join between steps, finished or cancelled ones leave and free their
// KV cache blocks at once. The scheduler owns one thread that runs the model;
// callers submit requests and receive their tokens through a callback, from
// the scheduler thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model.h"
#include "runtime/generator.h"

namespace anymoe {

class Engine;

struct SchedulerOptions {
  int max_parallel = 8;        // sequences decoded together in one step
  int max_queue = 64;          // waiting requests beyond which Submit fails
  int64_t context = 4096;      // tokens per sequence (prompt + generated)
  int64_t kv_cache_tokens = 0; // total KV cache, in tokens (0: max_parallel * context)
  // Called on the scheduler thread after each step, once its events went out
  // and before the next forward pass: the server waits there, briefly, for its
  // HTTP threads to write those events (see OpenAiServer::AwaitResponseWrites).
  std::function<void()> between_steps = nullptr;
  // Called on the scheduler thread with each step's batch just before its
  // forward pass (serving under expert parallelism sends it to the other
  // ranks there, runtime/step_broadcast.h). An error fails the step's
  // requests as a failed forward pass would, without running it.
  std::function<Status(std::span<const Model::SequenceStep>)> before_forward = nullptr;
  // Called on the scheduler thread about every `idle_interval` while nothing
  // runs (the other ranks learn that rank 0 is alive and idle); null: the
  // thread sleeps until a request comes.
  std::function<void()> idle = nullptr;
  std::chrono::milliseconds idle_interval{1000};
  // Speculative decoding for requests that ask for none themselves (their
  // GenerateOptions::spec, which may also be a callback): none or ngram. Each
  // sequence drafts on its own,
  // its drafts rows of the shared step, with its own DraftGovernor.
  SpeculativeOptions spec{};
  // Draft only what pays for its rows in this step: each step's time is
  // fitted as fixed + per-row cost (runtime/step_cost.h), and a sequence's
  // DraftGovernor weighs its acceptance against what one more row costs. Off:
  // drafts are cut only by the step's room and min_acceptance (so a served
  // request drafts exactly as a lone generation would; tests).
  bool price_draft_rows = true;
  // Share the KV blocks of identical token prefixes across requests: full
  // blocks are published under the hash of the tokens up to their end; a new
  // request starts from the longest run of cached blocks of its prompt and
  // prefills only the rest. Freed cached blocks are evicted LRU when the pool
  // needs them.
  bool prefix_cache = true;
  // Most prompt tokens prefilled in one step, all requests together (0: what
  // the step's token budget, the model's max_step_tokens, leaves after the
  // decode rows). A long prompt then goes in chunks of this size between the
  // other requests' decode steps, which bounds their inter-token latency by
  // the time of one chunk; results do not depend on it (batch-invariant
  // kernels).
  int64_t prefill_chunk = 0;
  // With decoding requests in a step, weigh each prompt token by its depth: a
  // token at position p costs 1 + p / prefill_depth_unit of the prompt budget
  // above (its attention over p keys beside the rest of its work; the unit is
  // the depth at which the two cost the same), so chunks deep in a long prompt
  // hold fewer tokens and the step stays about as long as a chunk at depth 0.
  // Every step with prompt tokens left feeds at least one. 0: count tokens.
  int64_t prefill_depth_unit = 0;
};

// Prompt tokens (at most `left`) a chunk starting at position `at` may hold
// when the token at position p costs 1 + p / depth_unit and the chunk may cost
// `budget` (depth_unit 0: every token costs 1); 0 when not even one fits.
int64_t PrefillChunkTokens(int64_t budget, int64_t at, int64_t left, int64_t depth_unit);

// The prefill_depth_unit `serve` uses unless told, from the model's shapes: a
// quarter of the ratio of a token's weight multiply-adds (its active
// parameters) to its attention's multiply-adds per cached key
// (AttentionMacsPerKey). The quarter is measured: attention ran at about a
// quarter of the matmuls' rate per multiply-add where the unit was calibrated
// (docs/server.md: 900-1070 on SmolLM2, 2221 on the GLM-4.5-shaped MoE file;
// this gives 973 and 2556). 0 (off) when no attention cost grows with depth.
int64_t DefaultPrefillDepthUnit(const ModelConfig& config);
// A request is admitted only when the KV pool can hold its prompt and all the
// tokens it may generate (up to the context), so a running request never runs
// out of cache; requests that do not fit wait.

// What happens to a request, in order: zero or more kToken events, then exactly
// one kDone or kError.
struct RequestEvent {
  enum class Kind { kToken, kDone, kError };
  Kind kind = Kind::kToken;
  int32_t token = -1;
  std::string text;            // new complete UTF-8 text (may be empty)
  float logprob = 0.0f;        // of `token`, when the request asked for logprobs
  std::vector<std::pair<int32_t, float>> top_logprobs;  // when requested
  StopReason reason = StopReason::kMaxTokens;            // kDone
  GenerateStats stats;                                   // kDone
  uint64_t model_version = 0;  // kDone: the weights' version it ran on (ChangeModel)
  // kDone of an embedding request (Request::embed): the pooled vector.
  std::vector<float> embedding;
  std::string error;                                     // kError
  std::string error_code;  // kError: machine-readable ("numerical_error"), may be empty
  // kError: kUnavailable when the engine itself failed (a rank of an expert
  // parallel job died: HTTP 503), else a failure of this request.
  ErrorKind error_kind = ErrorKind::kInternal;
};

struct Request {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  // Log-probabilities cost a pass over the vocabulary per token, so they are
  // computed only when asked for: `logprob` of each sampled token, and with
  // top_logprobs = n > 0 also the n most likely tokens per step.
  bool logprobs = false;
  int top_logprobs = 0;
  // Structured output (options.constraint is ignored here: the scheduler may
  // outlive the caller's stack, so the request owns its state).
  std::shared_ptr<ConstraintState> constraint;
  // An embedding request: the prompt runs, nothing is sampled, and kDone
  // carries the final-normed hidden states of all its positions pooled this
  // way (runtime/embedding_pooler.h). It runs every position itself (no
  // cached prefix: those blocks keep no hidden states) and drafts nothing.
  std::optional<EmbeddingPooling> embed;
  // Called on the scheduler thread; must not block for long.
  std::function<void(const RequestEvent&)> on_event;
};

class RequestHandle {
 public:
  // Asks the scheduler to stop this request; its slot and KV blocks are freed
  // within one step and it ends with kDone (reason kCancelled).
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::atomic<bool> cancelled_{false};
};

struct SchedulerStats {
  int running = 0;
  int waiting = 0;
  uint64_t prompt_tokens = 0;     // prefilled since start
  uint64_t generated_tokens = 0;  // sampled since start
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  uint64_t steps = 0;
  uint64_t drafted_tokens = 0;   // speculative drafts verified since start
  uint64_t accepted_tokens = 0;  // of which the model agreed with
  uint64_t prefix_cache_queries = 0;  // prompt tokens of admitted requests
  uint64_t prefix_cache_hits = 0;     // of those, served from cached blocks
  int64_t prefix_cache_blocks = 0;    // blocks holding published content
  bool model_change_pending = false;  // a ChangeModel waits for the running requests (drain)
};

class Scheduler {
 public:
  static Expected<std::unique_ptr<Scheduler>> Create(Engine& engine,
                                                     const SchedulerOptions& options);
  ~Scheduler();  // cancels what is left and joins the thread

  // Queues a request. Errors (one line, for an HTTP 4xx/503): an empty or too
  // long prompt ("... exceeds the context of N tokens"), invalid token ids, a
  // drafter the scheduler does not run (mtp), or a full queue
  // ("queue full"). Never blocks.
  Expected<std::shared_ptr<RequestHandle>> Submit(Request request);

  SchedulerStats stats() const;
  // Host memory kept over the vocabulary while `sequences` are decoded at
  // once: the step's logits row, its unmodified copy and order (logprobs),
  // and each sequence's sampler. Outside the model's memory plan; `serve`
  // prints it beside the plan.
  static uint64_t SamplingBytes(int64_t vocab, int64_t sequences);
  // Expert selection counts since start (MoE models), copied after each step,
  // safe to read from any thread.
  RoutingStats routing_stats() const;
  // Changes the model between steps (a live expert swap, POST
  // /admin/experts): `change` runs on the scheduler thread once no request is
  // running, so each request runs on one version of the weights from its
  // first step to its last. Requests queued meanwhile wait and start on the
  // new version (a drain: running ones are not cut short, new ones are held
  // at most as long as the longest running one still needs). On success the
  // model version goes up by one, cached prefixes are dropped (their keys and
  // values came from the old weights) and the new version is returned; a
  // failed `change` must leave the model as it was (the version stays).
  // Blocks the caller until then; fails (code shutting_down) when the
  // scheduler stops first. One change at a time: callers queue.
  Expected<uint64_t> ChangeModel(std::function<Status(Model&)> change);
  // Changes applied since start (0: the weights loaded), any thread.
  uint64_t model_version() const;
  // Stops accepting requests; lets running ones finish until `deadline`, then
  // cancels the rest. Returns when the scheduler thread has exited.
  void Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  Scheduler() = default;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anymoe
