#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "models/model_stats.h"
#include "models/workspace.h"
#include "runtime/engine.h"
#include "runtime/mtp_drafter.h"
#include "runtime/ngram_drafter.h"
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

// One request's life inside the scheduler.
struct Active {
  Active(Request r, std::shared_ptr<RequestHandle> h, const SpeculativeOptions& default_spec,
         const Tokenizer* tokenizer)
      : request(std::move(r)),
        handle(std::move(h)),
        decoder(request.options, request.constraint.get(), tokenizer),
        spec(request.options.spec.kind == SpecKind::kNone ? default_spec : request.options.spec),
        governor(spec.min_acceptance),
        submitted(Clock::now()) {
    history = request.prompt;
  }
  int64_t prompt_left() const { return int64_t(request.prompt.size()) - prefilled; }
  // Tokens of cache this request may need: its prompt and every token it may
  // generate (the last one is never fed back), within the context.
  int64_t budget(int64_t context) const {
    return std::min<int64_t>(context, int64_t(request.prompt.size()) +
                                          std::max<int64_t>(request.options.max_new_tokens - 1, 0));
  }

  Request request;
  std::shared_ptr<RequestHandle> handle;
  std::unique_ptr<KvCache> cache;
  TokenDecoder decoder;  // sampling and stop rules, as `anymoe run` applies them
  std::vector<int32_t> history;  // prompt + generated
  SpeculativeOptions spec;
  DraftGovernor governor;
  std::vector<int32_t> draft;    // this step's drafts
  std::vector<int32_t> fed;      // this step's decode tokens: the last one and the drafts
  bool mtp() const { return spec.kind == SpecKind::kMtp; }
  // --spec mtp: the MTP layer's own cache, as long as `cache` once a step's
  // rows are settled (made at the first step), and the drafts it made then.
  std::unique_ptr<KvCache> mtp_cache;
  std::vector<int32_t> mtp_draft;
  std::vector<int32_t> mtp_next;  // the token that follows each settled row
  int64_t step_first = 0;         // position of this step's first row
  int64_t drafted = 0, accepted = 0;
  int64_t prefilled = 0;
  uint64_t last_fed_step = 0;     // the step its prompt last had a chunk in (admitted: that step)
  int64_t generated() const { return decoder.generated(); }
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
    if (request.options.max_new_tokens < 1) {
      return Status::Error("max_tokens must be at least 1", ErrorKind::kInvalidArgument, "",
                           "max_tokens");
    }
    auto a = std::make_unique<Active>(std::move(request), nullptr, opt_.spec, &engine_.tokenizer());
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
            return stopping_ || (!waiting_.empty() && submitted_ != seen_submissions);
          };
          if (waiting_.empty() && opt_.idle) {
            if (!wake_.wait_for(lock, opt_.idle_interval,
                                [&] { return stopping_ || !waiting_.empty(); })) {
              lock.unlock();
              opt_.idle();
              continue;
            }
          } else if (waiting_.empty()) {
            wake_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
          } else if (!wakeup()) {
            wake_.wait_for(lock, std::chrono::milliseconds(50), wakeup);
          }
          seen_submissions = submitted_;
        }
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
  void Admit() {
    while (!waiting_.empty() && int(running_.size()) < opt_.max_parallel) {
      Active& a = *waiting_.front();
      if (!a.handle->cancelled()) {
        auto cache = std::make_unique<KvCache>(pool_.get(), opt_.context);
        // The MTP layer needs the trunk's hidden state at every prompt
        // position, which cached blocks do not keep: MTP requests run their
        // whole prompt (they still publish their blocks for others).
        if (opt_.prefix_cache && !a.mtp()) AdoptCachedPrefix(a, *cache);
        if (!cache->Reserve(a.budget(opt_.context)).ok()) {
          a.hashes.clear();  // the cache's destructor drops the adopted blocks
          break;             // wait for blocks
        }
        a.reused = cache->length();
        a.prefilled = a.reused;
        prefix_queries_ += a.request.prompt.size();
        prefix_hits_ += uint64_t(a.reused);
        a.cache = std::move(cache);
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
      const auto tokens = std::span(a.history).subspan(size_t(i * b), size_t(b));
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
      if (a->prompt_left() > 0 || budget == 0) continue;
      decoding_.push_back(a.get());
      --budget;
    }
    int64_t room = PlanPrefill(budget);
    int64_t planned = int64_t(decoding_.size());  // rows: decode, prompt, drafts so far
    for (const auto& chunk : prefill_plan_) planned += chunk.second;
    for (Active* a : decoding_) {
      // What one more row costs against the average row of this step.
      Propose(*a, room, RowShare(planned + 1));
      room -= int64_t(a->draft.size());
      planned += int64_t(a->draft.size());
      if (a->spec.on_draft && !a->draft.empty()) a->spec.on_draft(a->history, a->draft);
      a->step_first = a->cache->length();
      a->fed.assign(1, a->history.back());
      a->fed.insert(a->fed.end(), a->draft.begin(), a->draft.end());
      steps_.push_back({a->fed, a->cache.get(), /*all_logits=*/!a->draft.empty()});
      members_.push_back(a);
    }
    for (const auto& [a, n] : prefill_plan_) {
      a->step_first = a->prefilled;
      // The MTP layer reads the trunk's hidden state of every prompt row.
      steps_.push_back({std::span(a->request.prompt).subspan(size_t(a->prefilled), size_t(n)),
                        a->cache.get(), /*all_logits=*/a->mtp()});
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
    const Tensor hidden = KeepHiddenForMtp(logits->dim(0));
    int64_t row = 0;  // of this member's first logits row
    for (size_t i = 0; i < members_.size(); ++i) {
      Active& a = *members_[i];
      const Model::SequenceStep& step = steps_[i];
      const int64_t rows = step.all_logits ? int64_t(step.tokens.size()) : 1;
      row += rows;
      const bool was_prefill = a.prompt_left() > 0;
      if (was_prefill) {
        a.prefilled += int64_t(step.tokens.size());
        prompt_tokens_ += step.tokens.size();
        if (a.prompt_left() > 0) {  // more prompt chunks to go
          if (a.mtp()) {
            a.mtp_next.assign(a.request.prompt.begin() + a.step_first + 1,
                              a.request.prompt.begin() + a.prefilled + 1);
            SettleMtp(a, hidden, row - rows, 0);
          }
          continue;
        }
      }
      // A prompt's token comes from its last row. Row r of a decode step
      // verifies draft r; the next row only after an accepted draft.
      int64_t accepted = 0;
      for (int64_t r = was_prefill ? rows - 1 : 0; r < rows; ++r) {
        model_.backend().ReadF32(logits->RowSlice(row - rows + r, 1), logits_);
        const int32_t draft = was_prefill || size_t(r) >= a.draft.size() ? -1 : a.draft[size_t(r)];
        const bool agreed = Sample(a, draft);
        accepted += agreed;
        if (!agreed || done_.count(&a)) break;
      }
      if (!was_prefill && !a.draft.empty()) {
        // Drops the rejected drafts' rows; the blocks stay reserved for the request.
        a.cache->set_length(int64_t(a.history.size()) - 1);
        a.drafted += int64_t(a.draft.size());
        a.accepted += accepted;
        drafted_tokens_ += a.draft.size();
        accepted_tokens_ += uint64_t(accepted);
        a.governor.Record(int64_t(a.draft.size()), accepted);
      }
      if (a.mtp() && !done_.count(&a) && !failed_.count(&a)) {
        // Settled: the prompt's rows, or the fed token's and the accepted
        // drafts' rows, each followed by the next token; the last by the
        // token just sampled.
        const int64_t settled = was_prefill ? rows : accepted + 1;
        if (was_prefill) {
          a.mtp_next.assign(a.request.prompt.begin() + a.step_first + 1, a.request.prompt.end());
        } else {
          a.mtp_next.assign(a.fed.begin() + 1, a.fed.begin() + settled);
        }
        a.mtp_next.push_back(a.history.back());
        SettleMtp(a, hidden, row - rows, MtpDraftLength(a));
      }
    }
    // Published only now, after the rejected drafts' rows were dropped: a
    // shared block holds committed tokens only.
    if (opt_.prefix_cache) {
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
      int64_t n = PrefillChunkTokens(int64_t(cost), a->prefilled,
                                     std::min(a->prompt_left(), prefill), unit);
      if (n == 0 && prefill_plan_.empty()) n = 1;  // every step feeds a prompt token
      if (n == 0) break;
      prefill_plan_.emplace_back(a, n);
      a->last_fed_step = step_index_;
      prefill -= n;
      cost -= ChunkCost(a->prefilled, n, unit);
      spent += ChunkCost(a->prefilled, n, unit);
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

  // This step's drafts of a decoding sequence, at most `room` tokens: within
  // its KV reservation (its prompt and token budget) and context, and as many
  // as its governor finds worth a row costing `row_share` of the step's average.
  void Propose(Active& a, int64_t room, double row_share) {
    a.draft.clear();
    if (a.mtp()) {  // drafted when the last step settled (MtpDraftLength)
      a.draft.assign(a.mtp_draft.begin(),
                     a.mtp_draft.begin() + std::min<int64_t>(std::max<int64_t>(room, 0),
                                                             int64_t(a.mtp_draft.size())));
      return;
    }
    if (a.spec.kind != SpecKind::kNgram && a.spec.kind != SpecKind::kCallback) return;
    const int64_t want = std::min({a.spec.max_draft, room,
                                   a.request.options.max_new_tokens - a.generated() - 1,
                                   opt_.context - int64_t(a.history.size())});
    const int64_t n = a.governor.Allowed(want, row_share);
    if (n <= 0) return;
    if (a.spec.kind == SpecKind::kNgram) {
      ProposeNgramDraft(a.history, n, a.spec.ngram, a.draft);
    } else if (a.spec.drafter) {
      a.spec.drafter(a.history, n, a.draft);
      if (int64_t(a.draft.size()) > n) a.draft.resize(size_t(n));
    }
  }

  // Drafts the MTP layer makes for the next step: as `Propose` limits them,
  // but before the next step's room is known (that cuts them again).
  int64_t MtpDraftLength(Active& a) {
    const int64_t want = std::min({a.spec.max_draft, model_.max_step_tokens() - 1,
                                   a.request.options.max_new_tokens - a.generated() - 1,
                                   opt_.context - int64_t(a.history.size())});
    return std::max<int64_t>(a.governor.Allowed(want, RowShare(last_rows_ + 1)), 0);
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
      if (!mtp_) mtp_ = std::make_unique<MtpDrafter>(model_);
    }
    std::erase(running_, nullptr);
    return !running_.empty();
  }

  // The trunk's hidden rows of this step, copied when an MTP request needs
  // them: each MTP step overwrites Model::last_hidden().
  Tensor KeepHiddenForMtp(int64_t rows) {
    const bool any = std::any_of(members_.begin(), members_.end(),
                                 [](const Active* a) { return a->mtp(); });
    if (!any) return Tensor();
    if (mtp_hidden_.bytes() == 0) {
      const int64_t h = model_.config().hidden_size;
      if (Status s = mtp_hidden_.Allocate(model_.backend(),
                                          Workspace::Footprint(model_.max_step_tokens(), h));
          !s.ok()) {
        for (Active* a : members_) {
          if (a->mtp()) failed_[a] = s;
        }
        return Tensor();
      }
    }
    mtp_hidden_.Reset();
    const Tensor copy = mtp_hidden_.Take(rows, model_.config().hidden_size);
    model_.backend().Copy(model_.last_hidden(), copy);
    return copy;
  }

  // Appends the settled rows (those of `hidden` from `first_row` on, each
  // followed by its token in a.mtp_next) to the MTP cache and drafts up to
  // `max_draft` tokens for the next step.
  void SettleMtp(Active& a, const Tensor& hidden, int64_t first_row, int64_t max_draft) {
    if (failed_.count(&a)) return;  // also when the hidden rows could not be kept
    const Tensor rows = hidden.RowSlice(first_row, int64_t(a.mtp_next.size()));
    Status s = mtp_->Step(*a.mtp_cache, a.step_first, rows, a.mtp_next, max_draft, a.mtp_draft);
    if (!s.ok()) failed_[&a] = s;
  }

  // Samples one token from logits_ and hands it out; true when it is `draft`.
  bool Sample(Active& a, int32_t draft) {
    if (Status s = a.decoder.Prepare(logits_); !s.ok()) {
      failed_[&a] = s;  // this request only; the others go on
      return false;
    }
    RequestEvent ev;
    ev.kind = RequestEvent::Kind::kToken;
    const bool logprobs = a.request.logprobs || a.request.top_logprobs > 0;
    // Of the model's distribution (with logit_bias), before sampling.
    if (logprobs) LogProbs(a.request.top_logprobs, ev);
    // Tokens this step and later may still sample: the budget, or the context
    // (a full cache still samples one last token). history holds the
    // committed tokens; the cache's length also counts drafts.
    const int64_t remaining = std::min(a.request.options.max_new_tokens - a.generated(),
                                       opt_.context - int64_t(a.history.size()) + 1);
    auto decoded = a.decoder.Choose(logits_, a.history, draft, remaining);
    if (!decoded.ok()) {
      failed_[&a] = decoded.status();
      return false;
    }
    const int32_t id = decoded->token;
    ev.token = id;
    if (logprobs) ev.logprob = float(double(raw_logit_of(id)) - log_sum_exp_);
    ev.text = std::move(decoded->text);
    a.history.push_back(id);
    ++generated_tokens_;
    if (a.generated() == 1) a.first_token = Clock::now();
    if (a.request.on_event) a.request.on_event(ev);
    if (decoded->stop) {
      done_[&a] = *decoded->stop;
    } else if (int64_t(a.history.size()) > opt_.context) {
      // The tokens in the cache once this one is fed (the cache's own length
      // counts drafts still being verified).
      done_[&a] = StopReason::kContextFull;
    }
    return decoded->accepted;
  }

  float raw_logit_of(int32_t id) const { return raw_logits_[size_t(id)]; }

  // Keeps the unmodified logits (the sampler edits its copy) and their
  // log-sum-exp; fills the top-n alternatives when asked.
  void LogProbs(int top_n, RequestEvent& ev) {
    raw_logits_.assign(logits_.begin(), logits_.end());
    const float mx = *std::max_element(raw_logits_.begin(), raw_logits_.end());
    double sum = 0;
    for (float l : raw_logits_) sum += std::exp(double(l - mx));
    log_sum_exp_ = double(mx) + std::log(sum);
    if (top_n <= 0) return;
    order_.resize(raw_logits_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = int32_t(i);
    const size_t n = std::min(order_.size(), size_t(top_n));
    std::partial_sort(order_.begin(), order_.begin() + n, order_.end(), [&](int32_t x, int32_t y) {
      return raw_logits_[size_t(x)] != raw_logits_[size_t(y)] ? raw_logits_[size_t(x)] > raw_logits_[size_t(y)]
                                                              : x < y;
    });
    for (size_t i = 0; i < n; ++i) {
      ev.top_logprobs.emplace_back(order_[i],
                                   float(double(raw_logits_[size_t(order_[i])]) - log_sum_exp_));
    }
  }

  void Finish(std::unique_ptr<Active>& a, StopReason reason) {
    RequestEvent ev;
    ev.kind = RequestEvent::Kind::kDone;
    ev.reason = reason;
    if (reason != StopReason::kStopString) ev.text = a->decoder.Flush();
    const auto now = Clock::now();
    GenerateStats& s = ev.stats;
    s.prompt_tokens = int64_t(a->request.prompt.size()) - a->reused;
    s.reused_tokens = a->reused;
    s.generated_tokens = a->generated();
    if (a->generated() > 0) {
      s.ttft_seconds = Seconds(a->submitted, a->first_token);
      s.prompt_seconds = s.ttft_seconds;
      s.decode_seconds = Seconds(a->first_token, now);
    }
    s.drafted_tokens = a->drafted;
    s.accepted_tokens = a->accepted;
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
    if (!stepped) return;
    ++stats_.steps;
    if (model_.config().is_moe()) routing_ = model_.routing_stats();
  }

  Engine& engine_;
  Model& model_;
  const SchedulerOptions opt_;
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
  std::unique_ptr<MtpDrafter> mtp_;  // made for the first --spec mtp request
  Workspace mtp_hidden_;             // the trunk's hidden rows of a step, for MTP

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
