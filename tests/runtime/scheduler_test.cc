// Continuous batching: requests through the scheduler produce exactly what a
// lone Generator produces (greedy), also with 8 others running alongside, and
// transformers' tokens on the newest MoE goldens; a full
// queue is refused; cancelling frees the slot and the KV blocks; shutdown
// finishes or cancels by the deadline.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "models/model_stats.h"
#include "runtime/engine.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

using namespace std::chrono_literals;

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  StopReason reason = StopReason::kMaxTokens;
  GenerateStats stats;
  std::string error;
  std::promise<void> done;
};

class SchedulerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Load(/*mtp=*/false); }

  void Load(bool mtp) {
    EngineOptions o;
    o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/" + GetParam();
    o.threads = 2;
    o.max_step_tokens = 64;
    o.load_mtp = mtp;
    auto e = Engine::Load(o);
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine_ = std::move(e).value();
  }

  static GenerateOptions Greedy(int64_t n) {
    GenerateOptions g;
    g.max_new_tokens = n;
    g.sampling = SamplingParams::Greedy();
    return g;
  }

  Request MakeRequest(std::vector<int32_t> prompt, int64_t n, Collected* out) {
    Request r;
    r.prompt = std::move(prompt);
    r.options = Greedy(n);
    r.on_event = [out](const RequestEvent& ev) {
      if (ev.kind == RequestEvent::Kind::kToken) out->tokens.push_back(ev.token);
      out->text += ev.text;
      if (ev.kind == RequestEvent::Kind::kDone) out->reason = ev.reason, out->stats = ev.stats;
      if (ev.kind == RequestEvent::Kind::kError) out->error = ev.error;
      if (ev.kind != RequestEvent::Kind::kToken) out->done.set_value();
    };
    return r;
  }

  std::vector<int32_t> Alone(const std::vector<int32_t>& prompt, int64_t n) {
    Generator gen(engine_->model(), &engine_->tokenizer());
    auto seq = std::move(gen.NewSequence(256)).value();
    return gen.Generate(seq, prompt, Greedy(n), nullptr)->tokens;
  }

  // Stats are published after each step; wait for the step that freed the blocks.
  static int64_t BlocksUsedOnceIdle(const Scheduler& sched) {
    for (int i = 0; i < 500 && sched.stats().kv_blocks_used != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return sched.stats().kv_blocks_used;
  }

  static std::vector<int32_t> Prompt(int i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 5 + 3 * i; ++j) p.push_back(3 + (i * 37 + j * 11) % 500);
    return p;
  }

  std::unique_ptr<Engine> engine_;
};

// A model serves one thread at a time (the scheduler's), so the lone references
// are computed before the scheduler starts.
TEST_P(SchedulerTest, BatchedRequestsEqualLoneGeneration) {
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 9; ++i) expected.push_back(Alone(Prompt(i), 12));
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.max_parallel = 9,
                                                                       .context = 256})).value();
  std::vector<std::unique_ptr<Collected>> results;
  for (int i = 0; i < 9; ++i) {
    results.push_back(std::make_unique<Collected>());
    ASSERT_TRUE(sched->Submit(MakeRequest(Prompt(i), 12, results.back().get())).ok());
  }
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(results[size_t(i)]->done.get_future().wait_for(60s), std::future_status::ready);
    EXPECT_EQ(results[size_t(i)]->tokens, expected[size_t(i)]) << "request " << i;
    EXPECT_EQ(results[size_t(i)]->reason, StopReason::kMaxTokens);
  }
  EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
}

// --prefill-chunk: long prompts go in chunks of 7 tokens (all prefilling
// requests together) between the decode steps of the others, and every
// request still gets exactly the tokens of a lone generation (whose prefill
// runs in steps of 64); also with --prefill-depth-unit 16, whose chunks
// shrink to 1-2 tokens deep in the prompts.
TEST_P(SchedulerTest, ChunkedPrefillEqualsLoneGeneration) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = Prompt(i);
    if (i % 3 == 0) {  // two long prompts among short ones
      for (int j = 0; j < 90; ++j) p.push_back(3 + (i * 13 + j * 7) % 500);
    }
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(Alone(p, 10));
  for (const int64_t unit : {0, 16}) {
    SCOPED_TRACE("prefill_depth_unit " + std::to_string(unit));
    auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.max_parallel = 6,
                                                                         .context = 256,
                                                                         .prefill_chunk = 7,
                                                                         .prefill_depth_unit = unit}))
                     .value();
    std::vector<std::unique_ptr<Collected>> results;
    for (const auto& p : prompts) {
      results.push_back(std::make_unique<Collected>());
      ASSERT_TRUE(sched->Submit(MakeRequest(p, 10, results.back().get())).ok());
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(results[i]->done.get_future().wait_for(60s), std::future_status::ready);
      EXPECT_EQ(results[i]->tokens, expected[i]) << "request " << i;
    }
    EXPECT_EQ(sched->stats().prompt_tokens,
              std::accumulate(prompts.begin(), prompts.end(), uint64_t{0},
                              [](uint64_t n, const auto& p) { return n + p.size(); }));
    EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
  }
}

// The default depth unit from the shapes lands where it was measured
// (docs/server.md: N = a / b from per-token prefill times a + b d): 900-1070 on
// SmolLM2-135M, 2221 on the GLM-4.5-shaped MoE bench file (within 25 %: one
// busy-machine measurement). Both configs are those files' (`anymoe info`
// prints 134.52M and 167.54M active parameters for them).
TEST(DefaultPrefillDepthUnit, LandsWhereItWasMeasured) {
  ModelConfig smollm;
  smollm.arch = "llama";
  smollm.vocab_size = 49152, smollm.hidden_size = 576, smollm.num_layers = 30;
  smollm.num_heads = 9, smollm.num_kv_heads = 3, smollm.head_dim = 64;
  smollm.intermediate_size = 1536, smollm.tie_word_embeddings = true;
  smollm.ffn_kinds.assign(30, FfnKind::kDense);
  ASSERT_NEAR(double(CountParameters(smollm).active), 134.52e6, 0.01e6);
  const int64_t small = DefaultPrefillDepthUnit(smollm);
  EXPECT_GE(small, 900);
  EXPECT_LE(small, 1070);

  ModelConfig moe;
  moe.arch = "glm4_moe";
  moe.vocab_size = 32000, moe.hidden_size = 1024, moe.num_layers = 8;
  moe.num_heads = 16, moe.num_kv_heads = 4, moe.head_dim = 64, moe.attention_bias = true;
  moe.intermediate_size = 2736;
  moe.moe.num_experts = 64, moe.moe.experts_per_token = 8, moe.moe.expert_ffn = 512;
  moe.moe.shared_ffn = 512, moe.moe.selection_bias = true;
  moe.ffn_kinds.assign(8, FfnKind::kMoe);
  ASSERT_NEAR(double(CountParameters(moe).active), 167.54e6, 0.01e6);
  const int64_t unit = DefaultPrefillDepthUnit(moe);
  EXPECT_GE(unit, 2221 * 3 / 4);
  EXPECT_LE(unit, 2221 * 5 / 4);

  moe.num_layers = 0, moe.ffn_kinds.clear();  // no attention at all: off
  EXPECT_EQ(DefaultPrefillDepthUnit(moe), 0);
}

// Depth-weighed chunks: a token at position p costs 1 + p / unit of the
// budget, so a chunk holds fewer tokens the deeper it starts.
TEST(PrefillChunkTokens, ShrinkWithDepth) {
  EXPECT_EQ(PrefillChunkTokens(512, 16384, 10000, 0), 512);  // unit 0: tokens
  EXPECT_EQ(PrefillChunkTokens(512, 0, 100, 0), 100);        // what is left
  // 512 tokens from 0 with unit 1024 cost 512 + 512 * 511 / 2 / 1024 = 639.75:
  // n + n (n - 1) / 2048 <= 512 holds up to n = 424 (511.6; 425: 513.0).
  EXPECT_EQ(PrefillChunkTokens(512, 0, 10000, 1024), 424);
  // From 16384 each token costs ~17: 17 n + n (n - 1) / 2048 <= 512 up to 30
  // (510.4; 31: 527.5).
  EXPECT_EQ(PrefillChunkTokens(512, 16384, 10000, 1024), 30);
  EXPECT_EQ(PrefillChunkTokens(512, 16384, 20, 1024), 20);  // the prompt's rest
  EXPECT_EQ(PrefillChunkTokens(10, 1 << 20, 10000, 1024), 0);  // not one fits
  EXPECT_EQ(PrefillChunkTokens(0, 0, 10, 1024), 0);
}

// Speculative decoding inside continuous batching: each request drafts on its
// own (drafts right throughout, wrong from some offset on, n-gram lookup, or
// none) as rows of the shared steps, and every request still gets exactly
// the tokens of a lone plain generation; the rejected rows' rollback frees
// no block early (all come back once the requests end).
TEST_P(SchedulerTest, SpeculativeRequestsEqualLoneGeneration) {
  std::vector<std::vector<int32_t>> expected;
  for (int i = 0; i < 9; ++i) expected.push_back(Alone(Prompt(i), 16));
  SchedulerOptions so{.max_parallel = 9, .context = 256};
  so.spec.kind = SpecKind::kNgram;  // for requests that name no drafter
  auto sched = std::move(Scheduler::Create(*engine_, so)).value();
  std::vector<std::unique_ptr<Collected>> results;
  const int64_t vocab = engine_->model().config().vocab_size;
  for (int i = 0; i < 9; ++i) {
    results.push_back(std::make_unique<Collected>());
    Request r = MakeRequest(Prompt(i), 16, results.back().get());
    if (i < 6) {  // the right continuation, spoiled from offset i - 1 on (i = 0: never)
      const int wrong_at = i - 1;
      r.options.spec.kind = SpecKind::kCallback;
      r.options.spec.max_draft = 3;
      r.options.spec.drafter = [want = Prompt(i), out = expected[size_t(i)], wrong_at, vocab](
                                   std::span<const int32_t> ctx, int64_t max,
                                   std::vector<int32_t>& draft) {
        std::vector<int32_t> full = want;
        full.insert(full.end(), out.begin(), out.end());
        for (int64_t k = 0; k < max && ctx.size() + size_t(k) < full.size(); ++k) {
          const int32_t t = full[ctx.size() + size_t(k)];
          draft.push_back(wrong_at >= 0 && k >= wrong_at ? int32_t((t + 1) % vocab) : t);
        }
      };
    }
    ASSERT_TRUE(sched->Submit(std::move(r)).ok());
  }
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(results[size_t(i)]->done.get_future().wait_for(60s), std::future_status::ready);
    EXPECT_EQ(results[size_t(i)]->tokens, expected[size_t(i)]) << "request " << i;
    EXPECT_EQ(results[size_t(i)]->reason, StopReason::kMaxTokens);
  }
  EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
  const SchedulerStats st = sched->stats();
  EXPECT_GT(st.drafted_tokens, 0u);
  EXPECT_GT(st.accepted_tokens, 0u);
  EXPECT_LT(st.accepted_tokens, st.drafted_tokens);
}

// These models are loaded without an MTP layer (SchedulerMtpTest has one).
// Starvation, counted rather than timed (a loaded machine changes no count):
// 48 requests of 12-40 prompt tokens wait at once for 16 slots, while every
// decoding sequence drafts its right continuation, 8 tokens a step, so slots
// free fast and many prompts prefill at once. For each request, the requests
// submitted after it that have finished when it gets its first token: a fair
// scheduler lets a few through (those admitted with it whose prompts are
// shorter); one that lets drafts or shorter prompts crowd out a long prompt
// lets dozens. Without drafts as the control.
TEST_P(SchedulerTest, NoPromptStarvesWithOrWithoutDrafts) {
  constexpr int kRequests = 48;
  std::vector<std::vector<int32_t>> prompts, expected;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(Prompt(i));
    prompts.back().resize(size_t(12 + (i * 13) % 29));
    expected.push_back(Alone(prompts.back(), 6 + (i * 7) % 19));  // slots free one by one
  }
  for (bool drafts : {false, true}) {
    SCOPED_TRACE(drafts ? "drafting" : "plain");
    SchedulerOptions so{.max_parallel = 16, .context = 256};
    so.price_draft_rows = false;  // draft whatever the rows cost
    auto sched = std::move(Scheduler::Create(*engine_, so)).value();
    std::mutex mu;  // the events come on the scheduler thread
    int finished = 0;
    std::vector<int> finished_before_first(kRequests, -1), finish_order(kRequests, -1);
    std::vector<std::unique_ptr<Collected>> results;
    for (int i = 0; i < kRequests; ++i) {
      results.push_back(std::make_unique<Collected>());
      Request r = MakeRequest(prompts[size_t(i)], int64_t(expected[size_t(i)].size()),
                              results.back().get());
      if (drafts) {
        r.options.spec.kind = SpecKind::kCallback;
        r.options.spec.max_draft = 8;
        r.options.spec.drafter = [full = prompts[size_t(i)], out = expected[size_t(i)]](
                                     std::span<const int32_t> ctx, int64_t max,
                                     std::vector<int32_t>& draft) mutable {
          full.insert(full.end(), out.begin(), out.end());
          out.clear();
          for (size_t k = ctx.size(); k < full.size() && draft.size() < size_t(max); ++k) {
            draft.push_back(full[k]);
          }
        };
      }
      auto collect = std::move(r.on_event);
      r.on_event = [&, i, collect](const RequestEvent& ev) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (ev.kind == RequestEvent::Kind::kToken && finished_before_first[size_t(i)] < 0) {
            int later = 0;
            for (int j = i + 1; j < kRequests; ++j) later += finish_order[size_t(j)] >= 0;
            finished_before_first[size_t(i)] = later;
          }
          if (ev.kind != RequestEvent::Kind::kToken) finish_order[size_t(i)] = finished++;
        }
        collect(ev);
      };
      ASSERT_TRUE(sched->Submit(std::move(r)).ok());
    }
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_EQ(results[size_t(i)]->done.get_future().wait_for(120s), std::future_status::ready);
      ASSERT_EQ(results[size_t(i)]->error, "");
      EXPECT_EQ(results[size_t(i)]->tokens, expected[size_t(i)]) << "request " << i;
    }
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < kRequests; ++i) {
      EXPECT_LE(finished_before_first[size_t(i)], 4) << "request " << i;
    }
    if (drafts) {
      EXPECT_GT(sched->stats().accepted_tokens, 0u);
    }
  }
}

TEST_P(SchedulerTest, MtpDraftsNeedTheMtpLayer) {
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.context = 64})).value();
  Collected c;
  Request r = MakeRequest({5, 6, 7}, 4, &c);
  r.options.spec.kind = SpecKind::kMtp;
  auto h = sched->Submit(std::move(r));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), "mtp_unavailable");
  EXPECT_NE(h.status().message().find("MTP layer"), std::string::npos);
}

// The between-steps hook runs on the scheduler thread after each step's
// events and before the next step: every token is followed by a call.
TEST_P(SchedulerTest, BetweenStepsFollowsEachStepsEvents) {
  std::mutex mu;
  std::string log;  // 'T' per token event, 'B' per hook call
  std::thread::id hook_thread, event_thread;
  SchedulerOptions options{.max_parallel = 2, .context = 256};
  options.between_steps = [&] {
    std::lock_guard<std::mutex> lock(mu);
    log += 'B';
    hook_thread = std::this_thread::get_id();
  };
  auto sched = std::move(Scheduler::Create(*engine_, options)).value();
  Collected a, b;
  for (Collected* c : {&a, &b}) {
    Request r = MakeRequest(Prompt(c == &a ? 1 : 2), 6, c);
    r.on_event = [&, inner = r.on_event](const RequestEvent& ev) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (ev.kind == RequestEvent::Kind::kToken) log += 'T';
        event_thread = std::this_thread::get_id();
      }
      inner(ev);
    };
    ASSERT_TRUE(sched->Submit(std::move(r)).ok());
  }
  for (Collected* c : {&a, &b}) {
    ASSERT_EQ(c->done.get_future().wait_for(60s), std::future_status::ready);
  }
  sched->Shutdown(std::chrono::steady_clock::now() + 5s);  // the last hook call has returned
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(std::count(log.begin(), log.end(), 'T'), 12);
  EXPECT_EQ(log.back(), 'B') << log;
  // A step emits one or two tokens (two requests), then the hook runs.
  EXPECT_EQ(log.find("TTT"), std::string::npos) << log;
  EXPECT_EQ(log.find("BB"), std::string::npos) << log;  // no step without tokens here
  EXPECT_EQ(hook_thread, event_thread);
}

TEST_P(SchedulerTest, FullQueueIsRefused) {
  auto sched = std::move(Scheduler::Create(
                             *engine_, SchedulerOptions{.max_parallel = 1, .max_queue = 1,
                                                        .context = 256}))
                   .value();
  std::vector<std::unique_ptr<Collected>> results;
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    results.push_back(std::make_unique<Collected>());
    auto h = sched->Submit(MakeRequest(Prompt(i), 24, results.back().get()));
    if (!h.ok()) {
      ++refused;
      EXPECT_NE(h.status().message().find("queue full"), std::string::npos);
      EXPECT_EQ(h.status().kind(), ErrorKind::kUnavailable);
      EXPECT_EQ(h.status().code(), "queue_full");
      results.pop_back();
    }
  }
  EXPECT_GE(refused, 3);
  for (auto& r : results) ASSERT_EQ(r->done.get_future().wait_for(60s), std::future_status::ready);
}

TEST_P(SchedulerTest, CancelFreesTheSlotAndBlocks) {
  const auto expected = Alone(Prompt(2), 4);
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.max_parallel = 1,
                                                                       .context = 256})).value();
  Collected slow, next;
  // The slow request's first token waits for the cancel, so that it cannot
  // run to its token limit first on a fast or busy machine.
  std::promise<void> cancel_sent;
  Request slow_request = MakeRequest(Prompt(1), 200, &slow);
  slow_request.on_event = [collect = slow_request.on_event,
                           cancelled = cancel_sent.get_future().share()](const RequestEvent& ev) {
    if (ev.kind == RequestEvent::Kind::kToken) cancelled.wait();
    collect(ev);
  };
  auto handle = std::move(sched->Submit(std::move(slow_request))).value();
  ASSERT_TRUE(sched->Submit(MakeRequest(Prompt(2), 4, &next)).ok());
  handle->Cancel();
  cancel_sent.set_value();
  ASSERT_EQ(slow.done.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(slow.reason, StopReason::kCancelled);
  ASSERT_EQ(next.done.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(next.tokens, expected);
  EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
}

TEST_P(SchedulerTest, ShutdownCancelsWhatTheDeadlineDoesNotAllow) {
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.max_parallel = 2,
                                                                       .context = 256})).value();
  Collected a;
  ASSERT_TRUE(sched->Submit(MakeRequest(Prompt(3), 240, &a)).ok());
  sched->Shutdown(std::chrono::steady_clock::now());
  ASSERT_EQ(a.done.get_future().wait_for(1s), std::future_status::ready);
  EXPECT_EQ(a.reason, StopReason::kCancelled);
  Collected b;
  EXPECT_FALSE(sched->Submit(MakeRequest(Prompt(4), 4, &b)).ok());
}

TEST_P(SchedulerTest, OverlongPromptNamesTheLimit) {
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.context = 16})).value();
  Collected c;
  auto h = sched->Submit(MakeRequest(std::vector<int32_t>(20, 5), 4, &c));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("context of 16"), std::string::npos);
}

// Issue 20, defect 4: with a KV pool smaller than one context (`serve
// --kv-tokens 256 -c 2048`), a request that uses its whole context could never
// be admitted; it stayed queued while the loop spun without waiting, and every
// request behind it waited too. Such a pool is refused when the scheduler is
// created, as are settings that can serve nothing.
TEST_P(SchedulerTest, SettingsThatCanNeverServeAreRefused) {
  auto small = Scheduler::Create(
      *engine_, SchedulerOptions{.max_parallel = 2, .context = 256, .kv_cache_tokens = 64});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("smaller than the context of 256"), std::string::npos)
      << small.status().message();
  EXPECT_FALSE(Scheduler::Create(*engine_, SchedulerOptions{.max_queue = 0, .context = 64}).ok());
  EXPECT_FALSE(Scheduler::Create(*engine_, SchedulerOptions{.context = 1}).ok());
  EXPECT_FALSE(
      Scheduler::Create(*engine_, SchedulerOptions{.max_parallel = 0, .context = 64}).ok());
  // A pool of exactly one context admits a request that fills it.
  auto exact = Scheduler::Create(
      *engine_, SchedulerOptions{.max_parallel = 2, .context = 64, .kv_cache_tokens = 64});
  ASSERT_TRUE(exact.ok()) << exact.status().message();
  Collected c;
  ASSERT_TRUE((*exact)->Submit(MakeRequest(Prompt(0), 1000, &c)).ok());
  ASSERT_EQ(c.done.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(c.reason, StopReason::kContextFull);
}

// An idle scheduler waits: no steps are taken (or counted) while nothing runs.
TEST_P(SchedulerTest, IdleSchedulerTakesNoSteps) {
  auto sched = std::move(Scheduler::Create(*engine_, SchedulerOptions{.context = 64})).value();
  Collected c;
  ASSERT_TRUE(sched->Submit(MakeRequest(Prompt(1), 3, &c)).ok());
  ASSERT_EQ(c.done.get_future().wait_for(60s), std::future_status::ready);
  std::this_thread::sleep_for(50ms);  // the step that finished it is published
  const uint64_t steps = sched->stats().steps;
  EXPECT_GE(steps, 3u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(sched->stats().steps, steps);
}

// Submit's refusals are typed, so the server maps them without reading text.
TEST_P(SchedulerTest, RefusalsCarryAKindACodeAndAField) {
  auto sched =
      std::move(Scheduler::Create(
                    *engine_, SchedulerOptions{.max_parallel = 1, .max_queue = 1, .context = 16}))
          .value();
  Collected c;
  auto overlong = sched->Submit(MakeRequest(std::vector<int32_t>(20, 5), 4, &c));
  ASSERT_FALSE(overlong.ok());
  EXPECT_EQ(overlong.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(overlong.status().code(), "context_length_exceeded");
  EXPECT_EQ(overlong.status().field(), "prompt");
  auto bad_id = sched->Submit(MakeRequest({5, -1}, 4, &c));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(bad_id.status().code(), "invalid_token");
  sched->Shutdown(std::chrono::steady_clock::now());
  auto late = sched->Submit(MakeRequest({5, 6}, 4, &c));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().kind(), ErrorKind::kUnavailable);
  EXPECT_EQ(late.status().code(), "shutting_down");
}

// MTP drafts inside continuous batching, on the goldens with an MTP layer:
// MTP requests beside plain ones, long prompts in chunks (each chunk's rows go
// into the MTP cache), and every request gets exactly a lone plain
// generation's tokens; each MTP request drafts and accepts exactly as a lone
// Generator with MTP does: the same drafts after the same contexts (on
// random weights nearly all are rejected, so the rollbacks are exercised;
// equal drafts mean the MTP cache followed every chunk and every rollback),
// and every block comes back.
class SchedulerMtpTest : public SchedulerTest {
 protected:
  void SetUp() override { Load(/*mtp=*/true); }

  // Each step's drafts after the context length they follow.
  using Drafts = std::vector<std::pair<size_t, std::vector<int32_t>>>;
  static void RecordDrafts(SpeculativeOptions& spec, Drafts* out) {
    spec.on_draft = [out](std::span<const int32_t> context, std::span<const int32_t> draft) {
      out->push_back({context.size(), std::vector<int32_t>(draft.begin(), draft.end())});
    };
  }

  GenerateResult AloneWithMtp(const std::vector<int32_t>& prompt, int64_t n, Drafts* drafts) {
    Generator gen(engine_->model(), &engine_->tokenizer());
    auto seq = std::move(gen.NewSequence(256)).value();
    GenerateOptions o = Greedy(n);
    o.spec.kind = SpecKind::kMtp;
    o.spec.max_draft = 3;
    RecordDrafts(o.spec, drafts);
    return *gen.Generate(seq, prompt, o, nullptr);
  }
};

TEST_P(SchedulerMtpTest, MtpRequestsEqualLoneGenerationAndDraftAlike) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = Prompt(i);
    if (i % 3 == 0) {  // long prompts: several chunks
      for (int j = 0; j < 40; ++j) p.push_back(3 + (i * 13 + j * 7) % 500);
    }
    prompts.push_back(p);
  }
  std::vector<std::vector<int32_t>> expected;
  std::vector<GenerateResult> lone_mtp;
  std::vector<Drafts> lone_drafts(prompts.size()), served_drafts(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    expected.push_back(Alone(prompts[i], 14));
    if (i % 2 == 0) lone_mtp.push_back(AloneWithMtp(prompts[i], 14, &lone_drafts[i]));
  }
  SchedulerOptions so{.max_parallel = 6, .context = 256, .prefill_chunk = 7};
  so.spec.kind = SpecKind::kMtp;  // for requests that name no drafter
  so.spec.max_draft = 3;
  so.price_draft_rows = false;    // the drafts of a lone generation, exactly
  auto sched = std::move(Scheduler::Create(*engine_, so)).value();
  std::vector<std::unique_ptr<Collected>> results;
  for (size_t i = 0; i < prompts.size(); ++i) {
    results.push_back(std::make_unique<Collected>());
    Request r = MakeRequest(prompts[i], 14, results.back().get());
    if (i % 2 == 1) {
      r.options.spec.kind = SpecKind::kNgram;  // MTP beside other drafters
    } else {
      r.options.spec = so.spec;
      RecordDrafts(r.options.spec, &served_drafts[i]);
    }
    ASSERT_TRUE(sched->Submit(std::move(r)).ok());
  }
  int64_t drafted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(results[i]->done.get_future().wait_for(60s), std::future_status::ready);
    ASSERT_EQ(results[i]->error, "");
    EXPECT_EQ(results[i]->tokens, expected[i]) << "request " << i;
    if (i % 2 == 0) {
      const GenerateStats& lone = lone_mtp[i / 2].stats;
      EXPECT_EQ(lone_mtp[i / 2].tokens, expected[i]) << "request " << i;
      EXPECT_EQ(results[i]->stats.drafted_tokens, lone.drafted_tokens) << "request " << i;
      EXPECT_EQ(results[i]->stats.accepted_tokens, lone.accepted_tokens) << "request " << i;
      EXPECT_EQ(served_drafts[i], lone_drafts[i]) << "request " << i;
      drafted += results[i]->stats.drafted_tokens;
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
}

// DeepSeek-V3.2, Kimi K2.5's text model and GLM-5.3-Flash (whose KDA state each
// sequence carries across its chunks and decode steps, its 150-token prompt
// crossing KDA chunks and KPool's sparse regime) served, against transformers
// (tests/golden/moe/*/golden.json): the 40-token golden prompt in a mixed
// batch of 8 sequences (prompts of 8 to 60 tokens prefilling in chunks of 7
// while the shorter ones decode) and alone with prompt chunks of 3, 8 and 17
// tokens (3 < index_topk 4 < 8: the DSA turns sparse inside a chunk or at its
// edge) gives transformers' 24 greedy tokens, on every CPU target.
class SchedulerGoldenTest : public SchedulerTest {
 protected:
  void SetUp() override {}  // each CPU target loads its own engine

  std::string GoldenJsonPath() const {
    std::string name = GetParam().substr(GetParam().find('/') + 1);
    if (name.ends_with(".gguf")) name.resize(name.size() - 5);
    return std::string(ANYMOE_GOLDEN_DIR) + "/moe/" + name + "/golden.json";
  }

  // Serves `prompts` (24 greedy tokens each) and returns what each got.
  std::vector<std::vector<int32_t>> Serve(const std::vector<std::vector<int32_t>>& prompts,
                                          int64_t chunk) {
    SchedulerOptions so{.max_parallel = int(prompts.size()), .context = 256,
                        .prefill_chunk = chunk};
    auto sched = std::move(Scheduler::Create(*engine_, so)).value();
    std::vector<std::unique_ptr<Collected>> results;
    for (const auto& p : prompts) {
      results.push_back(std::make_unique<Collected>());
      EXPECT_TRUE(sched->Submit(MakeRequest(p, 24, results.back().get())).ok());
    }
    std::vector<std::vector<int32_t>> tokens;
    for (auto& r : results) {
      EXPECT_EQ(r->done.get_future().wait_for(60s), std::future_status::ready);
      EXPECT_EQ(r->error, "");
      tokens.push_back(r->tokens);
    }
    EXPECT_EQ(BlocksUsedOnceIdle(*sched), 0);
    return tokens;
  }
};

TEST_P(SchedulerGoldenTest, MixedBatchAndPromptChunksGiveTransformersTokens) {
  const auto golden = nlohmann::json::parse(std::ifstream(GoldenJsonPath()));
  const auto prompt = golden["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = golden["greedy_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(want.size(), 24u);
  for (const std::string& target : testing::CpuTargetNames()) {
    SCOPED_TRACE(target);
    testing::ScopedCpuTarget scoped(target);
    Load(/*mtp=*/false);
    std::vector<std::vector<int32_t>> batch;
    std::vector<std::vector<int32_t>> alone;
    for (int i = 0; i < 8; ++i) {
      std::vector<int32_t> p = i % 3 == 0 ? prompt : Prompt(i);
      if (i % 3 == 2) {  // long ones that still prefill while others decode
        for (int j = 0; j < 40; ++j) p.push_back(3 + (i * 13 + j * 7) % 500);
      }
      alone.push_back(i % 3 == 0 ? want : Alone(p, 24));
      batch.push_back(std::move(p));
    }
    const auto served = Serve(batch, 7);
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(served[i], alone[i]) << "request " << i;
    for (const int64_t chunk : {3, 8, 17}) {
      EXPECT_EQ(Serve({prompt, Prompt(5)}, chunk)[0], want) << "prefill chunk " << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NewestMoeModels, SchedulerGoldenTest,
                         ::testing::Values("moe/deepseek_v32", "moe_gguf/deepseek_v32.gguf",
                                           "moe/kimi_k25", "moe_gguf/kimi_k25.gguf",
                                           "moe/glm5_next", "moe_gguf/glm5_next.gguf"),
                         [](const auto& info) { return testing::TestNameOf(info.param); });

INSTANTIATE_TEST_SUITE_P(MtpModels, SchedulerMtpTest,
                         ::testing::Values("fp8/glm_moe_dsa", "fp8/deepseek_v3",
                                           "mtp/glm_moe_dsa_mtp.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

INSTANTIATE_TEST_SUITE_P(Models, SchedulerTest,
                         ::testing::Values("llama_tiny", "moe/glm_moe_dsa"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace anymoe
