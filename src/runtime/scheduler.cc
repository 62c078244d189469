#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "models/model_stats.h"
#include "runtime/decoding_sequence.h"
#include "runtime/embedding_pooler.h"
#include "runtime/engine.h"
#include "runtime/mtp_drafter.h"
#include "runtime/step_cost.h"
#include "runtime/token_decoder.h"

namespace anymoe {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Steps a prompt may go without a prefill chunk before it is served ahead of
// shorter prompts (Scheduler::Impl::PrefillOrder).
constexpr uint64_t kPrefillPatience = 8;

// The budget n prompt tokens from position `at` take when the token at
// position p costs 1 + p / unit (unit 0: 1 each).
double ChunkCost(int64_t at, int64_t n, int64_t unit) {
  if (unit <= 0) return double(n);
  return double(n) + (double(n) * double(at) + double(n) * double(n - 1) / 2) / double(unit);
}

// One request's life inside the scheduler: its decoding (the rules `anymoe
// run` applies too, runtime/decoding_sequence.h) and its place in the queue,
// the KV pool and the prefix cache.
struct Active {
  Active(Request r, std::shared_ptr<RequestHandle> h, const SpeculativeOptions& default_spec,
         const Tokenizer* tokenizer, int64_t context, int64_t step_tokens)
      : request(std::move(r)),
        handle(std::move(h)),
        seq(request.prompt, 0, request.options,
            request.embed                                ? SpeculativeOptions{}
            : request.options.spec.kind == SpecKind::kNone ? default_spec
                                                           : request.options.spec,
            request.constraint.get(), tokenizer, context, step_tokens),
        submitted(Clock::now()) {}
  int64_t prompt_left() const { return seq.prompt_left(); }
  bool mtp() const { return seq.mtp(); }
  // Tokens of cache this request may need: its prompt and every token it may
  // generate (the last one is never fed back), within the context.
  int64_t budget(int64_t context) const {
    return std::min<int64_t>(context, int64_t(request.prompt.size()) +
                                          std::max<int64_t>(request.options.max_new_tokens - 1, 0));
  }

  Request request;
  std::shared_ptr<RequestHandle> handle;
  std::unique_ptr<KvCache> cache;
  // --spec mtp: the MTP layer's own cache (made before the first step).
  std::unique_ptr<KvCache> mtp_cache;
  DecodingSequence seq;
  std::optional<EmbeddingPooler> pooler;  // Request::embed
  uint64_t last_fed_step = 0;     // the step its prompt last had a chunk in (admitted: that step)
  int64_t reused = 0;             // prompt tokens from cached blocks
  std::vector<uint64_t> hashes;   // prefix hash of each full block published or adopted
  Clock::time_point submitted, first_token;
};

}  // namespace

class Scheduler::Impl {
 public:
  // The MoE layers' zero counts are there from the start: a reader learns the
  // model's expert layout before the first step (the chat page does).
  Impl(Engine& engine, const SchedulerOptions& o)
      : engine_(engine), model_(engine.model()), opt_(o) {
    if (model_.config().is_moe()) routing_ = model_.routing_stats();
  }
  ~Impl() {
    Shutdown(Clock::now());
  }

  Status Start() {
    if (opt_.max_parallel < 1 || opt_.max_queue < 1 || opt_.context < 2) {
      return Status::Error("scheduler: max_parallel " + std::to_string(opt_.max_parallel) +
                           ", max_queue " + std::to_string(opt_.max_queue) + ", context " +
                           std::to_string(opt_.context) +
                           ": need at least 1 slot, 1 queue place and a context of 2 tokens");
    }
    const int64_t tokens =
        opt_.kv_cache_tokens > 0 ? opt_.kv_cache_tokens : opt_.max_parallel * opt_.context;
    // A pool smaller than one context could never admit a request that uses
    // its whole context: refuse the setting instead of queueing such
    // requests forever (issue 20).
    if (tokens < opt_.context) {
      return Status::Error(
          "KV cache of " + std::to_string(tokens) + " tokens is smaller than the context of " +
          std::to_string(opt_.context) + " tokens: one sequence could never reach its context");
    }
    ASSIGN_OR_RETURN(pool_, model_.NewPool(tokens, opt_.context));
    // Shared blocks cannot hand a sequence the recurrent (KDA) state at their
    // end: without state snapshots there is no prefix caching for such models.
    prefix_cache_ = opt_.prefix_cache && pool_->state_floats() == 0;
    logits_.resize(size_t(model_.config().vocab_size));
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  Expected<std::shared_ptr<RequestHandle>> Submit(Request request) {
    const auto& prompt = request.prompt;
    if (prompt.empty()) {
      return Status::Error("the prompt is empty", ErrorKind::kInvalidArgument, "empty_prompt",
                           "prompt");
    }
    if (int64_t(prompt.size()) >= opt_.context) {
      return Status::Error("prompt of " + std::to_string(prompt.size()) +
                               " tokens exceeds the context of " + std::to_string(opt_.context) +
                               " tokens",
                           ErrorKind::kInvalidArgument, "context_length_exceeded", "prompt");
    }
    for (int32_t id : prompt) {
      if (id < 0 || id >= model_.config().vocab_size) {
        return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary",
                             ErrorKind::kInvalidArgument, "invalid_token", "prompt");
      }
    }
    if (request.embed) request.options.max_new_tokens = 1;  // its budget: the prompt
    if (request.options.max_new_tokens < 1) {
      return Status::Error("max_tokens must be at least 1", ErrorKind::kInvalidArgument, "",
                           "max_tokens");
    }
    auto a = std::make_unique<Active>(std::move(request), nullptr, opt_.spec, &engine_.tokenizer(),
                                      opt_.context, model_.max_step_tokens());
    if (a->mtp() && model_.mtp() == nullptr) {  // its own spec, or the server's default
      return Status::Error("speculative decoding with mtp drafts needs the model's MTP layer "
                           "(serve --spec mtp loads it)",
                           ErrorKind::kInvalidArgument, "mtp_unavailable");
    }
    // Admission reserves the request's whole budget at once; one that needs
    // more blocks than the pool has would wait forever.
    const int64_t need = a->budget(opt_.context);
    const int64_t b = pool_->block_tokens();
    if ((need + b - 1) / b > pool_->num_blocks()) {
      return Status::Error("the request needs " + std::to_string(need) +
                               " tokens of KV cache (prompt and max_tokens) but the cache holds " +
                               std::to_string(pool_->num_blocks() * b),
                           ErrorKind::kInvalidArgument, "kv_cache_too_small", "max_tokens");
    }
    auto handle = std::make_shared<RequestHandle>();
    a->handle = handle;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return Status::Error("server is shutting down", ErrorKind::kUnavailable, "shutting_down");
    }
    if (int(waiting_.size()) >= opt_.max_queue) {
      return Status::Error("queue full: " + std::to_string(waiting_.size()) +
                               " requests waiting (limit " + std::to_string(opt_.max_queue) + ")",
                           ErrorKind::kUnavailable, "queue_full");
    }
    waiting_.push_back(std::move(a));
    ++submitted_;
    wake_.notify_one();
    return handle;
  }

  SchedulerStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  RoutingStats routing_stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return routing_;
  }

  Expected<uint64_t> ChangeModel(std::function<Status(Model&)> change) {
    std::lock_guard<std::mutex> one_at_a_time(change_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {
      return Status::Error("server is shutting down", ErrorKind::kUnavailable, "shutting_down");
    }
    change_ = std::move(change);
    change_done_ = false;
    wake_.notify_one();
    changed_.wait(lock, [&] { return change_done_; });
    if (!change_result_.ok()) return change_result_;
    return model_version_.load();
  }

  uint64_t model_version() const { return model_version_.load(); }

  void Shutdown(Clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      deadline_ = deadline;
      wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    uint64_t seen_submissions = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        // With nothing running, wait for a new request, a shutdown, or (to
        // see cancels of queued requests) 50 ms: never spin. Queued requests
        // always fit an empty pool (Submit refuses the rest), so this wait
        // only happens when there is really nothing to do.
        if (running_.empty()) {
          const auto wakeup = [&] {
            return stopping_ || change_ != nullptr ||
                   (!waiting_.empty() && submitted_ != seen_submissions);
          };
          if (waiting_.empty() && opt_.idle) {
            if (!wake_.wait_for(lock, opt_.idle_interval, [&] {
                  return stopping_ || !waiting_.empty() || change_ != nullptr;
                })) {
              lock.unlock();
              opt_.idle();
              continue;
            }
          } else if (waiting_.empty()) {
            wake_.wait(lock,
                       [&] { return stopping_ || !waiting_.empty() || change_ != nullptr; });
          } else if (!wakeup()) {
            wake_.wait_for(lock, std::chrono::milliseconds(50), wakeup);
          }
          seen_submissions = submitted_;
        }
        if (change_ != nullptr && (stopping_ || running_.empty())) ApplyChange();
        if (stopping_ && waiting_.empty() && running_.empty()) return;
        if (stopping_ && Clock::now() >= deadline_) {
          for (auto& a : waiting_) a->handle->Cancel();
          for (auto& a : waiting_) running_.push_back(std::move(a));
          waiting_.clear();
          for (auto& a : running_) a->handle->Cancel();
        }
        Admit();
      }
      DropCancelled();
      if (!running_.empty()) {
        Step();
        if (opt_.between_steps) opt_.between_steps();
        PublishStats(/*stepped=*/true);
      } else {
        PublishStats(/*stepped=*/false);
      }
    }
  }

  // Moves waiting requests in while slots and KV blocks allow (in order: a
  // request that does not fit holds back the ones behind it, so none starves).
  // The pending ChangeModel, with mu_ held and nothing running (or stopping).
  void ApplyChange() {
    if (stopping_) {
      change_result_ = Status::Error("server is shutting down", ErrorKind::kUnavailable,
                                     "shutting_down");
    } else {
      change_result_ = change_(model_);
      if (change_result_.ok()) {
        pool_->DropCachedContent();
        ++model_version_;
      }
    }
    change_ = nullptr;
    change_done_ = true;
    changed_.notify_all();
  }

  void Admit() {
    // Draining for a model change: what is queued starts on the new weights.
    if (change_ != nullptr) return;
    while (!waiting_.empty() && int(running_.size()) < opt_.max_parallel) {
      Active& a = *waiting_.front();
      if (!a.handle->cancelled()) {
        auto cache = std::make_unique<KvCache>(pool_.get(), opt_.context);
        // The MTP layer needs the trunk's hidden state at every prompt
        // position, which cached blocks do not keep: MTP requests run their
        // whole prompt (they still publish their blocks for others).
        // Nor do embedding requests, which pool every position's.
        if (prefix_cache_ && !a.mtp() && !a.request.embed) AdoptCachedPrefix(a, *cache);
        if (!cache->Reserve(a.budget(opt_.context)).ok()) {
          a.hashes.clear();  // the cache's destructor drops the adopted blocks
          break;             // wait for blocks
        }
        a.reused = cache->length();
        a.seq.set_prefilled(a.reused);
        prefix_queries_ += a.request.prompt.size();
        prefix_hits_ += uint64_t(a.reused);
        a.cache = std::move(cache);
        a.seq.AttachCaches(a.cache.get(), nullptr);
        a.last_fed_step = step_index_;
      }
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
  }

  // The longest run of cached blocks that starts the prompt, leaving at least
  // one prompt token to run (its logits give the first token).
  void AdoptCachedPrefix(Active& a, KvCache& cache) {
    const int64_t b = pool_->block_tokens();
    const auto& prompt = a.request.prompt;
    const int64_t full = (int64_t(prompt.size()) - 1) / b;
    std::vector<int32_t> blocks;
    uint64_t hash = 0;
    for (int64_t i = 0; i < full; ++i) {
      const auto tokens = std::span(prompt).subspan(size_t(i * b), size_t(b));
      hash = PrefixBlockHash(hash, tokens);
      const int32_t block = pool_->AcquireCached(hash, tokens);
      if (block < 0) break;
      blocks.push_back(block);
      a.hashes.push_back(hash);
    }
    cache.Adopt(blocks);
  }

  // Publishes the blocks `a` filled since the last step (prompt and
  // generated tokens: a later turn's prompt holds this reply).
  void PublishFullBlocks(Active& a) {
    const int64_t b = pool_->block_tokens();
    const int64_t full = a.cache->length() / b;
    for (int64_t i = int64_t(a.hashes.size()); i < full; ++i) {
      const auto tokens = std::span(a.seq.history()).subspan(size_t(i * b), size_t(b));
      const uint64_t hash = PrefixBlockHash(a.hashes.empty() ? 0 : a.hashes.back(), tokens);
      pool_->Publish(a.cache->block_ids()[size_t(i)], hash, tokens);
      a.hashes.push_back(hash);
    }
  }

  void DropCancelled() {
    for (auto& a : running_) {
      if (a && a->handle->cancelled()) Finish(a, StopReason::kCancelled);
    }
    std::erase(running_, nullptr);
  }

  // One forward pass, planned in three passes over the step's token budget
  // (the model's max_step_tokens):
  //   1. one row for every sequence past its prompt (its last token);
  //   2. prompt chunks with what is left, at most opt_.prefill_chunk, in
  //      PrefillOrder;
  //   3. drafts with what is still left, each decoding sequence in turn.
  // Prompts come before drafts so that speculation never slows admission:
  // a queued request's prefill progresses per step exactly as it would with
  // speculation off (drafting sequences only fill the room prompts leave).
  void Step() {
    if (!MakeMtpCaches()) return;
    ++step_index_;
    steps_.clear();
    members_.clear();
    decoding_.clear();
    int64_t budget = model_.max_step_tokens();
    for (auto& a : running_) {
      // A recurrent model's replay after a partial accept takes rows too.
      const int64_t rows = 1 + a->seq.pending_replay();
      if (a->prompt_left() > 0 || budget < rows) continue;
      decoding_.push_back(a.get());
      budget -= rows;
    }
    int64_t room = PlanPrefill(budget);
    int64_t planned = int64_t(decoding_.size());  // rows: decode, prompt, drafts so far
    for (const auto& chunk : prefill_plan_) planned += chunk.second;
    for (Active* a : decoding_) {
      // What one more row costs against the average row of this step.
      const auto tokens = a->seq.DecodeTokens(room, RowShare(planned + 1));
      const int64_t drafts = int64_t(tokens.size()) - 1 - a->seq.replayed_this_step();
      room -= drafts;
      planned += drafts;
      steps_.push_back({.tokens = tokens,
                         .cache = a->cache.get(),
                         .all_logits = a->seq.all_logits(),
                         .token_by_token = true});
      members_.push_back(a);
    }
    for (const auto& [a, n] : prefill_plan_) {
      const auto tokens = a->seq.PrefillTokens(n);
      // With MTP, all_logits: the MTP layer reads the trunk's hidden state
      // of every prompt row.
      steps_.push_back({.tokens = tokens,
                         .cache = a->cache.get(),
                         .all_logits = a->seq.all_logits(),
                         .embeddings = a->request.embed.has_value()});
      members_.push_back(a);
    }
    int64_t rows = 0;
    for (const auto& step : steps_) rows += int64_t(step.tokens.size());
    const Status sent = opt_.before_forward ? opt_.before_forward(steps_) : Status::Ok();
    const auto forward_start = Clock::now();
    auto logits = sent.ok() ? model_.ForwardBatch(steps_) : Expected<Tensor>(sent);
    if (logits.ok()) {
      model_.backend().Synchronize();
      step_cost_.Observe(rows, Seconds(forward_start, Clock::now()));
      last_rows_ = rows;
    }
    // Sampling and handing tokens to the HTTP threads run on this thread
    // alone: the backend's idle workers give their cores to those threads
    // instead of spinning until the next step.
    model_.backend().Idle();
    if (!logits.ok()) {
      for (auto& a : running_) Fail(a, logits.status());
      std::erase(running_, nullptr);
      return;
    }
    int64_t row = 0;  // of this member's first logits row
    int64_t embedding_row = 0;  // of this member's first last_embeddings() row
    settles_.clear();
    for (size_t i = 0; i < members_.size(); ++i) {
      Active& a = *members_[i];
      const Model::SequenceStep& step = steps_[i];
      const bool prompt_step = a.prompt_left() > 0;
      if (prompt_step) prompt_tokens_ += step.tokens.size();
      if (a.request.embed) {
        Pool(a, step, embedding_row);
        embedding_row += int64_t(step.tokens.size());
        row += step.all_logits ? int64_t(step.tokens.size()) : 1;
        continue;
      }
      const int64_t drafted = a.seq.drafted(), accepted = a.seq.accepted();
      EventSink sink(*this, a);
      // MTP drafts for the next step are made now: priced at this step's rows.
      if (Status s = a.seq.Consume(model_.backend(), *logits, row, logits_, sink,
                                   RowShare(last_rows_ + 1));
          !s.ok()) {
        failed_[&a] = s;  // this request only; the others go on
      } else if (a.seq.done()) {
        done_[&a] = *a.seq.stop();
      } else if (MtpSettle* settle = a.seq.mtp_settle()) {
        settles_.push_back(settle);
        settling_.push_back(&a);
      }
      drafted_tokens_ += uint64_t(a.seq.drafted() - drafted);
      accepted_tokens_ += uint64_t(a.seq.accepted() - accepted);
      row += step.all_logits ? int64_t(step.tokens.size()) : 1;
    }
    // The MTP layer's steps of all sequences of this step, in one batch.
    if (!settles_.empty()) {
      if (Status s = mtp_->Settle(settles_, model_.last_hidden()); !s.ok()) {
        for (Active* a : settling_) failed_[a] = s;
      }
      settles_.clear();
      settling_.clear();
    }
    // Published only now, after the rejected drafts' rows were dropped: a
    // shared block holds committed tokens only.
    if (prefix_cache_) {
      for (Active* a : members_) PublishFullBlocks(*a);
    }
    for (auto& a : running_) {
      if (a && failed_.count(a.get())) Fail(a, failed_[a.get()]);
      if (a && done_.count(a.get())) Finish(a, done_[a.get()]);
    }
    done_.clear();
    failed_.clear();
    std::erase(running_, nullptr);
  }

  // Feeds an embedding request's rows of this step to its pooler; with its
  // prompt done, the request is done.
  void Pool(Active& a, const Model::SequenceStep& step, int64_t first_row) {
    const int64_t hidden = model_.config().hidden_size, n = int64_t(step.tokens.size());
    if (!a.pooler) a.pooler.emplace(*a.request.embed, hidden, int64_t(a.request.prompt.size()));
    const Tensor rows = model_.last_embeddings();
    embedding_scratch_.resize(size_t(hidden));
    for (int64_t r = 0; r < n; ++r) {
      model_.backend().ReadF32(rows.RowSlice(first_row + r, 1), embedding_scratch_);
      a.pooler->Add(embedding_scratch_);
    }
    a.seq.set_prefilled(a.seq.prefilled() + n);
    if (a.prompt_left() == 0) done_[&a] = StopReason::kMaxTokens;
  }

  // The prompt chunks of this step (prefill_plan_), within `budget` tokens
  // and opt_.prefill_chunk, in PrefillOrder; every step with prompt tokens
  // left feeds at least one. Returns the room left for drafts: the budget
  // less what the chunks cost (in depth-0 tokens, ChunkCost).
  int64_t PlanPrefill(int64_t budget) {
    prefill_plan_.clear();
    PrefillOrder();
    int64_t prefill = opt_.prefill_chunk > 0 ? std::min(opt_.prefill_chunk, budget) : budget;
    // Depth weighs only when others wait for this step's tokens.
    const int64_t unit = decoding_.empty() ? 0 : opt_.prefill_depth_unit;
    double cost = double(prefill);  // what is left of the chunk's budget, in depth-0 tokens
    double spent = 0;               // what the chunks cost
    for (Active* a : prefilling_) {
      if (prefill == 0) break;
      int64_t n = PrefillChunkTokens(int64_t(cost), a->seq.prefilled(),
                                     std::min(a->prompt_left(), prefill), unit);
      if (n == 0 && prefill_plan_.empty()) n = 1;  // every step feeds a prompt token
      if (n == 0) break;
      prefill_plan_.emplace_back(a, n);
      a->last_fed_step = step_index_;
      prefill -= n;
      cost -= ChunkCost(a->seq.prefilled(), n, unit);
      spent += ChunkCost(a->seq.prefilled(), n, unit);
    }
    return std::max<int64_t>(0, budget - int64_t(std::ceil(spent)));
  }

  // The order in which prompts get this step's prefill budget (prefilling_).
  // Fewest tokens left first (ties in arrival order): a short request admitted
  // while a long prompt prefills gets its first token after one step instead
  // of after the whole long prompt. But shortest-first alone starves a long
  // prompt while shorter ones keep arriving (with drafts or without), so a
  // prompt that has had no chunk for kPrefillPatience steps goes before all
  // of those, the longest unfed first: no admitted prompt waits more than
  // kPrefillPatience steps plus one step per prompt overdue before it.
  void PrefillOrder() {
    prefilling_.clear();
    for (auto& a : running_) {
      if (a->prompt_left() > 0) prefilling_.push_back(a.get());
    }
    const auto overdue = [&](const Active* a) {
      return step_index_ - a->last_fed_step >= kPrefillPatience;
    };
    std::stable_sort(prefilling_.begin(), prefilling_.end(), [&](const Active* x, const Active* y) {
      if (overdue(x) != overdue(y)) return overdue(x);
      if (overdue(x)) return x->last_fed_step < y->last_fed_step;
      return x->prompt_left() < y->prompt_left();
    });
  }

  // What one more row costs in a step of `rows` rows, against its average row
  // (0: free, when not priced).
  double RowShare(int64_t rows) const {
    return opt_.price_draft_rows ? step_cost_.RowShare(rows) : 0;
  }

  // Each MTP request's layer cache, made before its first step; a request
  // whose cache cannot be made fails alone. False when nothing is left to run.
  bool MakeMtpCaches() {
    for (auto& a : running_) {
      if (!a->mtp() || a->mtp_cache) continue;
      auto cache = model_.NewMtpCache(opt_.context);
      if (!cache.ok()) {
        Fail(a, cache.status());
        continue;
      }
      a->mtp_cache = std::move(*cache);
      a->seq.AttachCaches(a->cache.get(), a->mtp_cache.get());
      if (!mtp_) mtp_ = std::make_unique<MtpDrafter>(model_);
    }
    std::erase(running_, nullptr);
    return !running_.empty();
  }

  // A served request's tokens: an event each to its caller, with their
  // log-probabilities when asked.
  class EventSink : public TokenSink {
   public:
    EventSink(Impl& impl, Active& a)
        : impl_(impl), a_(a), logprobs_(a.request.logprobs || a.request.top_logprobs > 0) {}
    void OnPrepared(std::span<const float> logits) override {
      ev_ = RequestEvent();
      // Of the model's distribution (with logit_bias), before sampling.
      if (logprobs_) impl_.LogProbs(logits, a_.request.top_logprobs, ev_);
    }
    bool OnToken(const DecodedToken& token) override {
      ev_.kind = RequestEvent::Kind::kToken;
      ev_.token = token.token;
      if (logprobs_) {
        ev_.logprob = float(double(impl_.raw_logits_[size_t(token.token)]) - impl_.log_sum_exp_);
      }
      ev_.text = token.text;
      ++impl_.generated_tokens_;
      if (a_.seq.generated() == 1) a_.first_token = Clock::now();
      if (a_.request.on_event) a_.request.on_event(ev_);
      return true;  // cancels come through the handle, between steps
    }

   private:
    Impl& impl_;
    Active& a_;
    bool logprobs_;
    RequestEvent ev_;
  };

  // Keeps the unmodified logits (the sampler edits its copy) and their
  // log-sum-exp; fills the top-n alternatives when asked.
  void LogProbs(std::span<const float> logits, int top_n, RequestEvent& ev) {
    raw_logits_.assign(logits.begin(), logits.end());
    const float mx = *std::max_element(raw_logits_.begin(), raw_logits_.end());
    double sum = 0;
    for (float l : raw_logits_) sum += std::exp(double(l - mx));
    log_sum_exp_ = double(mx) + std::log(sum);
    if (top_n <= 0) return;
    order_.resize(raw_logits_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = int32_t(i);
    const size_t n = std::min(order_.size(), size_t(top_n));
    std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), [&](int32_t x, int32_t y) {
      const float lx = raw_logits_[size_t(x)], ly = raw_logits_[size_t(y)];
      return lx != ly ? lx > ly : x < y;
    });
    for (size_t i = 0; i < n; ++i) {
      ev.top_logprobs.emplace_back(order_[i],
                                   float(double(raw_logits_[size_t(order_[i])]) - log_sum_exp_));
    }
  }

  void Finish(std::unique_ptr<Active>& a, StopReason reason) {
    RequestEvent ev;
    ev.kind = RequestEvent::Kind::kDone;
    ev.model_version = model_version_.load();
    ev.reason = reason;
    if (reason != StopReason::kStopString && !a->request.embed) ev.text = a->seq.Flush();
    if (a->pooler && reason != StopReason::kCancelled) ev.embedding = a->pooler->Result();
    const auto now = Clock::now();
    GenerateStats& s = ev.stats;
    s.prompt_tokens = int64_t(a->request.prompt.size()) - a->reused;
    s.reused_tokens = a->reused;
    s.generated_tokens = a->seq.generated();
    if (a->seq.generated() > 0) {
      s.ttft_seconds = Seconds(a->submitted, a->first_token);
      s.prompt_seconds = s.ttft_seconds;
      s.decode_seconds = Seconds(a->first_token, now);
    }
    s.drafted_tokens = a->seq.drafted();
    s.accepted_tokens = a->seq.accepted();
    if (a->request.on_event) a->request.on_event(ev);
    a.reset();  // frees the KV blocks
  }

  void Fail(std::unique_ptr<Active>& a, const Status& error) {
    RequestEvent ev;
    ev.kind = RequestEvent::Kind::kError;
    ev.error = error.message();
    ev.error_code = error.code();
    if (error.kind() == ErrorKind::kUnavailable) ev.error_kind = ErrorKind::kUnavailable;
    if (a->request.on_event) a->request.on_event(ev);
    a.reset();
  }

  void PublishStats(bool stepped) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.running = int(running_.size());
    stats_.waiting = int(waiting_.size());
    stats_.kv_blocks_total = pool_->num_blocks();
    stats_.kv_blocks_used = pool_->used_blocks();
    stats_.prompt_tokens = prompt_tokens_;
    stats_.generated_tokens = generated_tokens_;
    stats_.drafted_tokens = drafted_tokens_;
    stats_.accepted_tokens = accepted_tokens_;
    stats_.prefix_cache_queries = prefix_queries_;
    stats_.prefix_cache_hits = prefix_hits_;
    stats_.prefix_cache_blocks = pool_->cached_blocks();
    stats_.model_change_pending = change_ != nullptr;
    if (!stepped) return;
    ++stats_.steps;
    if (model_.config().is_moe()) routing_ = model_.routing_stats();
  }

  Engine& engine_;
  Model& model_;
  const SchedulerOptions opt_;
  bool prefix_cache_ = true;  // opt_.prefix_cache, unless the model keeps recurrent state
  std::unique_ptr<KvPool> pool_;
  std::thread thread_;

  mutable std::mutex mu_;  // guards everything below up to the scheduler-thread-only part
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Active>> waiting_;
  uint64_t submitted_ = 0;  // requests queued since start: wakes an idle loop
  bool stopping_ = false;
  Clock::time_point deadline_;
  SchedulerStats stats_;
  RoutingStats routing_;
  std::function<Status(Model&)> change_;  // the pending ChangeModel, or null
  bool change_done_ = false;
  Status change_result_;
  std::condition_variable changed_;
  std::mutex change_mu_;  // held by the one ChangeModel caller at a time (before mu_)
  std::atomic<uint64_t> model_version_{0};

  // Scheduler thread only.
  std::vector<std::unique_ptr<Active>> running_;
  std::vector<Model::SequenceStep> steps_;
  std::vector<Active*> members_;
  std::vector<Active*> decoding_;    // this step's sequences past their prompt
  std::vector<Active*> prefilling_;  // this step's prompts, in PrefillOrder
  std::vector<std::pair<Active*, int64_t>> prefill_plan_;  // this step's prompt chunks
  uint64_t step_index_ = 0;          // steps run since start
  StepCostModel step_cost_;          // what a row costs, from the steps' times
  int64_t last_rows_ = 0;            // rows of the last step
  std::map<Active*, StopReason> done_;
  std::map<Active*, Status> failed_;  // this step (non-finite logits, a constraint)
  std::vector<float> logits_, raw_logits_;
  std::vector<float> embedding_scratch_;  // one row of last_embeddings()
  std::unique_ptr<MtpDrafter> mtp_;  // made for the first --spec mtp request
  std::vector<MtpSettle*> settles_;  // this step's MTP layer steps
  std::vector<Active*> settling_;     // whose they are

  std::vector<int32_t> order_;
  double log_sum_exp_ = 0;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t drafted_tokens_ = 0, accepted_tokens_ = 0;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

Expected<std::unique_ptr<Scheduler>> Scheduler::Create(Engine& engine,
                                                       const SchedulerOptions& options) {
  std::unique_ptr<Scheduler> s(new Scheduler());
  s->impl_ = std::make_unique<Impl>(engine, options);
  RETURN_IF_ERROR(s->impl_->Start());
  return s;
}

Scheduler::~Scheduler() = default;

Expected<std::shared_ptr<RequestHandle>> Scheduler::Submit(Request request) {
  return impl_->Submit(std::move(request));
}

Expected<uint64_t> Scheduler::ChangeModel(std::function<Status(Model&)> change) {
  return impl_->ChangeModel(std::move(change));
}

uint64_t Scheduler::model_version() const { return impl_->model_version(); }

SchedulerStats Scheduler::stats() const { return impl_->stats(); }

uint64_t Scheduler::SamplingBytes(int64_t vocab, int64_t sequences) {
  // logits_ and raw_logits_ (floats), order_ (int32), a sampler per sequence.
  return uint64_t(vocab) * (2 * sizeof(float) + sizeof(int32_t)) +
         uint64_t(sequences) * Sampler::StateBytes(vocab);
}
RoutingStats Scheduler::routing_stats() const { return impl_->routing_stats(); }

void Scheduler::Shutdown(std::chrono::steady_clock::time_point deadline) {
  impl_->Shutdown(deadline);
}

int64_t PrefillChunkTokens(int64_t budget, int64_t at, int64_t left, int64_t depth_unit) {
  if (depth_unit <= 0) return std::clamp<int64_t>(budget, 0, left);
  int64_t lo = 0, hi = std::max<int64_t>(left, 0);  // the cost grows with n: bisect
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ChunkCost(at, mid, depth_unit) <= double(budget)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

int64_t DefaultPrefillDepthUnit(const ModelConfig& config) {
  const int64_t per_key = AttentionMacsPerKey(config);
  if (per_key <= 0) return 0;
  return std::max<int64_t>(1, CountParameters(config).active / (4 * per_key));
}

}  // namespace anymoe
