// Speculative decoding: drafts verified in one step leave the output of plain
// decoding unchanged, bit for bit (tokens and every step's logits), greedy and
// seeded, whichever drafts are accepted: none (a rejection, and a rollback of
// the KV cache, at every position), some (a rejection at each offset of the
// draft), or all; on GQA (llama, SmolLM2), MLA (DeepSeek-V3) and MLA + DSA
// (GLM-5) models. The next turn reuses the rolled-back cache. The acceptance
// rule keeps the sampler's distribution (a chi-square test on a toy case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat/json_constraint.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/ngram_drafter.h"
#include "runtime/speculative.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

TEST(NgramDrafter, ProposesWhatFollowedTheLatestLongestMatchWithRoomToDraft) {
  std::vector<int32_t> draft;
  const NgramDraftOptions o;  // 3 down to 2
  // "1 2 3" occurs at 0 and (more recently) at 5: the later one's followers win.
  const std::vector<int32_t> ctx = {1, 2, 3, 4, 9, 1, 2, 3, 7, 8, 0, 1, 2, 3};
  ProposeNgramDraft(ctx, 3, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{7, 8, 0}));
  ProposeNgramDraft(ctx, 1, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{7}));
  // Only a 2-token suffix matches ("5 6" at 2): a shorter match is tried next.
  ProposeNgramDraft(std::vector<int32_t>{4, 4, 5, 6, 1, 8, 5, 6}, 4, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{1, 8, 5, 6}));
  // Fewer followers than asked for: what there is.
  ProposeNgramDraft(std::vector<int32_t>{5, 6, 7, 5, 6}, 8, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{7, 5, 6}));
  // The latest "1 2 3" (at 8) has 4 followers: enough for 4, but for 8 the
  // older one at 0, with 8 or more, is taken.
  const std::vector<int32_t> repeated = {1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 9, 1, 2, 3};
  ProposeNgramDraft(repeated, 4, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{9, 1, 2, 3}));
  ProposeNgramDraft(repeated, 8, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{4, 5, 6, 7, 0, 1, 2, 3}));
  // No occurrence of "1 2" has 8 followers: the one with the most (at 0: 6),
  // not the latest (at 4: 2).
  ProposeNgramDraft(std::vector<int32_t>{1, 2, 7, 8, 1, 2, 1, 2}, 8, o, draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{7, 8, 1, 2, 1, 2}));
  // No match of 2 or more, or no room: nothing.
  ProposeNgramDraft(std::vector<int32_t>{1, 2, 3, 4, 3}, 4, o, draft);
  EXPECT_TRUE(draft.empty());
  ProposeNgramDraft(ctx, 0, o, draft);
  EXPECT_TRUE(draft.empty());
  ProposeNgramDraft(std::vector<int32_t>{}, 4, o, draft);
  EXPECT_TRUE(draft.empty());
}

// The verify rule for a deterministic draft d (a point-mass proposal): the
// emitted token must be distributed as the sampler's p, and d accepted with
// probability p(d). Checked over 200,000 seeded trials by a chi-square test
// (df = 4, threshold 25: p-value ~ 5e-5; a rule that accepted d more or less
// often than p(d) moves the statistic by thousands) and a 5-sigma bound on
// the acceptance rate, for a draft inside the top-k and one outside it.
TEST(SpeculativeRule, EmittedTokensFollowTheSamplersDistribution) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 5;  // token 5 is never sampled
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 12345;
  std::vector<double> p(6, 0.0);
  double z = 0;
  for (int i = 0; i < 5; ++i) z += std::exp(logits[size_t(i)] / 0.7);
  for (int i = 0; i < 5; ++i) p[size_t(i)] = std::exp(logits[size_t(i)] / 0.7) / z;

  for (const int32_t d : {1, 5}) {
    Sampler sampler(sp);
    const int trials = 200000;
    std::vector<int64_t> counts(6, 0);
    int64_t accepted = 0;
    std::vector<float> row;
    for (int i = 0; i < trials; ++i) {
      row = logits;
      const DraftVerdict v = VerifyDraftRow(sampler, row, {}, d);
      ASSERT_GE(v.token, 0);
      ASSERT_LT(v.token, 6);
      ++counts[size_t(v.token)];
      accepted += v.accepted;
      ASSERT_EQ(v.accepted, v.token == d);
    }
    EXPECT_EQ(counts[5], 0);
    double chi2 = 0;
    for (int i = 0; i < 5; ++i) {
      const double expected = trials * p[size_t(i)];
      chi2 += (counts[size_t(i)] - expected) * (counts[size_t(i)] - expected) / expected;
    }
    EXPECT_LT(chi2, 25.0) << "draft " << d;
    const double pd = p[size_t(d)];
    const double sigma = std::sqrt(trials * pd * (1 - pd));
    EXPECT_LE(std::abs(double(accepted) - trials * pd), 5 * sigma + 1e-9) << "draft " << d;
  }
}

// The governor pauses drafting while most drafts are rejected, for longer each
// time it fails again, and drafts fully while they are accepted.
TEST(DraftGovernor, PausesWhileDraftsDoNotPay) {
  DraftGovernor off(0.0f);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(off.Allowed(4), 4);
    off.Record(4, 0);
  }
  DraftGovernor g(0.3f);
  int steps_to_pause = 0;
  while (g.Allowed(4) == 4) {
    g.Record(4, 0);
    ++steps_to_pause;
    ASSERT_LT(steps_to_pause, 100);
  }
  EXPECT_GE(steps_to_pause, 5);  // 1 -> below 0.3 at weight 1/8 per step: ~10 steps
  EXPECT_LE(steps_to_pause, 12);
  auto paused_for = [&g] {
    int n = 1;  // the Allowed that returned 0 above / below
    while (g.Allowed(4) == 0) ++n;
    return n;
  };
  EXPECT_EQ(paused_for(), 8);
  g.Record(4, 0);  // resumes and fails twice: a longer pause
  EXPECT_EQ(g.Allowed(4), 4);
  g.Record(4, 0);
  EXPECT_EQ(g.Allowed(4), 0);
  EXPECT_EQ(paused_for(), 16);
  for (int i = 0; i < 20; ++i) {  // drafts pay again: never paused
    g.Record(4, 3);
    EXPECT_EQ(g.Allowed(4), 4);
  }
  EXPECT_GT(g.acceptance(), 0.6);
}

// With a row share (what a draft row costs against the step's average row),
// the governor drafts only the tokens whose acceptance, about rate^j for the
// j-th, is worth the row; below the share it pauses as below min_acceptance.
TEST(DraftGovernor, DraftsOnlyWhatPaysForItsRow) {
  DraftGovernor free_rows(0.0f);
  for (int i = 0; i < 40; ++i) free_rows.Record(4, 2);  // rate -> 0.5
  EXPECT_NEAR(free_rows.acceptance(), 0.5, 0.01);
  EXPECT_EQ(free_rows.Allowed(4, 0.0), 4);   // rows cost nothing: all drafts
  EXPECT_EQ(free_rows.Allowed(4, 0.2), 2);   // 0.5, 0.25 >= 0.2 > 0.125
  EXPECT_EQ(free_rows.Allowed(4, 0.3), 1);   // 0.5 >= 0.3 > 0.25
  EXPECT_EQ(free_rows.Allowed(4, 0.01), 4);  // capped by what is wanted
  // A compute-bound step (a row costs as much as the average): at rate 0.5
  // drafting loses, so the next verify step pauses it.
  DraftGovernor busy(0.0f);
  int steps = 0;
  while (busy.Allowed(4, 0.9) > 0) {
    busy.Record(4, 2);
    ASSERT_LT(++steps, 100);
  }
  EXPECT_TRUE(busy.paused());
  EXPECT_LE(steps, 8);
}

struct SpecCase {
  std::string name;
  std::string path;
  bool mtp = false;    // load the MTP layer and draft with it too
  std::string target = "";  // the CPU kernels' target (empty: the machine's best)
};

void PrintTo(const SpecCase& c, std::ostream* os) { *os << c.name; }

std::string Golden(const char* p) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + p; }

class SpeculativeGenerate : public ::testing::TestWithParam<SpecCase> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(GetParam().path)) GTEST_SKIP() << GetParam().path << " absent";
    // Skipped before loading anything: tests for one kind of model only.
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    if (test.starts_with("Mtp") && !GetParam().mtp) GTEST_SKIP() << "no MTP layer";
    if (test.starts_with("Constrained") && GetParam().name != "smollm2") {
      GTEST_SKIP() << "needs a real tokenizer";
    }
    if (!GetParam().target.empty()) target_.emplace(GetParam().target);
    EngineOptions o;
    o.model_path = GetParam().path;
    o.threads = 2;
    o.progress = false;
    o.context = 256;
    o.max_step_tokens = 32;
    o.load_mtp = GetParam().mtp;
    auto e = Engine::Load(o);
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine_ = std::move(e).value();
    // Repetitive, so that n-gram drafts are proposed and often right.
    prompt_ = engine_->Encode(
        "one two three four five six. one two three four five six. one two three four five six. "
        "one two three");
    ASSERT_GT(prompt_.size(), 8u);
  }

  struct Run {
    GenerateResult first, second;
    int64_t cache_length = 0, blocks = 0, pool_used = 0;
    // MTP runs: the context length and first draft of each step.
    std::vector<std::pair<int64_t, int32_t>> drafts;
  };

  // Two turns on one sequence: the second continues the first's output with
  // a few more prompt tokens, so it reuses the cache the first left behind.
  Run Generate(const SpeculativeOptions& spec, const SamplingParams& sampling, int64_t n = 24) {
    Generator g(engine_->model(), &engine_->tokenizer());
    auto seq = g.NewSequence(engine_->context());
    EXPECT_TRUE(seq.ok());
    GenerateOptions o;
    o.max_new_tokens = n;
    o.sampling = sampling;
    o.record_logits = true;
    o.spec = spec;
    Run run;
    if (spec.kind == SpecKind::kMtp) {
      o.spec.on_draft = [&run](std::span<const int32_t> context, std::span<const int32_t> draft) {
        run.drafts.push_back({int64_t(context.size()), draft[0]});
      };
    }
    auto first = g.Generate(*seq, prompt_, o, nullptr);
    EXPECT_TRUE(first.ok()) << first.status().message();
    if (!first.ok()) return run;
    run.first = *first;
    run.cache_length = seq->cache->length();
    EXPECT_EQ(seq->cache->length(), int64_t(seq->tokens.size()));
    run.blocks = seq->cache->blocks();
    run.pool_used = seq->cache->pool().used_blocks();
    std::vector<int32_t> next = prompt_;
    next.insert(next.end(), first->tokens.begin(), first->tokens.end());
    next.insert(next.end(), prompt_.begin(), prompt_.begin() + 5);
    auto second = g.Generate(*seq, next, o, nullptr);
    EXPECT_TRUE(second.ok()) << second.status().message();
    if (second.ok()) run.second = *second;
    EXPECT_EQ(seq->cache->length(), int64_t(seq->tokens.size()));
    return run;
  }

  // Drafts the reference continuation `ref` (of `prompt`, then of its
  // continuation), spoiled from offset `wrong_at` of each draft on (-1: never).
  SpeculativeOptions Oracle(const Run& ref, int wrong_at) {
    SpeculativeOptions s;
    s.kind = SpecKind::kCallback;
    s.max_draft = 4;
    const int64_t vocab = engine_->model().config().vocab_size;
    std::vector<int32_t> full = prompt_;  // first turn, then the second's whole context
    full.insert(full.end(), ref.first.tokens.begin(), ref.first.tokens.end());
    full.insert(full.end(), prompt_.begin(), prompt_.begin() + 5);
    full.insert(full.end(), ref.second.tokens.begin(), ref.second.tokens.end());
    const size_t first_end = prompt_.size() + ref.first.tokens.size();
    std::vector<int32_t> first(full.begin(), full.begin() + int64_t(first_end));
    s.drafter = [full, first, wrong_at, vocab](std::span<const int32_t> ctx, int64_t max,
                                                std::vector<int32_t>& draft) {
      // Which turn: the context is a prefix of the first turn's or the second's.
      const std::vector<int32_t>& src =
          ctx.size() <= first.size() && std::equal(ctx.begin(), ctx.end(), first.begin()) ? first
                                                                                           : full;
      for (int64_t i = 0; i < max && ctx.size() + size_t(i) < src.size(); ++i) {
        const int32_t t = src[ctx.size() + size_t(i)];
        draft.push_back(wrong_at >= 0 && i >= wrong_at ? int32_t((t + 1) % vocab) : t);
      }
    };
    return s;
  }

  static void ExpectSame(const Run& a, const Run& b, const std::string& what) {
    EXPECT_EQ(a.first.tokens, b.first.tokens) << what;
    EXPECT_EQ(a.second.tokens, b.second.tokens) << what;
    EXPECT_EQ(a.first.text, b.first.text) << what;
    ASSERT_EQ(a.first.logits.size(), b.first.logits.size()) << what;
    EXPECT_EQ(0, std::memcmp(a.first.logits.data(), b.first.logits.data(),
                             a.first.logits.size() * sizeof(float)))
        << what << ": logits differ";
    ASSERT_EQ(a.second.logits.size(), b.second.logits.size()) << what;
    EXPECT_EQ(0, std::memcmp(a.second.logits.data(), b.second.logits.data(),
                             a.second.logits.size() * sizeof(float)))
        << what << ": second-turn logits differ";
    EXPECT_EQ(a.cache_length, b.cache_length) << what;
  }

  std::optional<testing::ScopedCpuTarget> target_;  // outlives the engine
  std::unique_ptr<Engine> engine_;
  std::vector<int32_t> prompt_;
};

TEST_P(SpeculativeGenerate, GreedyOutputIsThatOfPlainDecoding) {
  const SamplingParams greedy = SamplingParams::Greedy();
  const Run plain = Generate({}, greedy);
  EXPECT_EQ(plain.first.stats.drafted_tokens, 0);

  SpeculativeOptions ngram;
  ngram.kind = SpecKind::kNgram;
  ngram.max_draft = 4;
  const Run ng = Generate(ngram, greedy);
  ExpectSame(plain, ng, "ngram");
  EXPECT_LE(ng.first.stats.decode_steps, plain.first.stats.decode_steps);
  // The pool holds what the sequence reserved, no block more or less.
  EXPECT_EQ(ng.pool_used, ng.blocks);

  // Every draft right: all accepted, fewer steps.
  const Run all = Generate(Oracle(plain, -1), greedy);
  ExpectSame(plain, all, "oracle");
  EXPECT_GT(all.first.stats.drafted_tokens, 0);
  EXPECT_EQ(all.first.stats.accepted_tokens, all.first.stats.drafted_tokens);
  EXPECT_LT(all.first.stats.decode_steps, plain.first.stats.decode_steps / 2);

  // A rejection at every offset of the draft; at 0: every step rolls back.
  for (int wrong_at = 0; wrong_at < 4; ++wrong_at) {
    const Run r = Generate(Oracle(plain, wrong_at), greedy);
    ExpectSame(plain, r, "wrong from draft offset " + std::to_string(wrong_at));
    EXPECT_GT(r.first.stats.drafted_tokens, 0);
    if (wrong_at == 0) {
      EXPECT_EQ(r.first.stats.accepted_tokens, 0);
    } else {
      EXPECT_GT(r.first.stats.accepted_tokens, 0);
    }
    EXPECT_LE(r.first.stats.accepted_tokens, r.first.stats.decode_steps * wrong_at);
  }
}

// Seeded sampling emits the same tokens with speculation on or off: the
// verify rule draws once per emitted token (runtime/speculative.h), and the
// logits are bitwise those of plain steps.
TEST_P(SpeculativeGenerate, SeededSamplingIsThatOfPlainDecoding) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 7;
  const Run plain = Generate({}, sp);
  SpeculativeOptions ngram;
  ngram.kind = SpecKind::kNgram;
  ExpectSame(plain, Generate(ngram, sp), "ngram");
  if (GetParam().mtp) {
    SpeculativeOptions mtp;
    mtp.kind = SpecKind::kMtp;
    ExpectSame(plain, Generate(mtp, sp), "mtp");
  }
  const Run oracle = Generate(Oracle(plain, 2), sp);
  ExpectSame(plain, oracle, "oracle, wrong from offset 2");
  EXPECT_GT(oracle.first.stats.accepted_tokens, 0);
}

// With the MTP layer: the same output, and each step's first draft, in both
// turns, is the MTP's argmax for its position as a batched pass of the trunk
// and then the MTP layer over the finished text computes it (row p pairs the
// trunk's state at p with token p + 1), so the MTP cache followed the trunk
// through every rollback and into the next turn.
TEST_P(SpeculativeGenerate, MtpDraftsAreTheMtpLayersPredictions) {
  const SamplingParams greedy = SamplingParams::Greedy();
  const Run plain = Generate({}, greedy);
  SpeculativeOptions mtp;
  mtp.kind = SpecKind::kMtp;
  mtp.max_draft = 3;
  const Run r = Generate(mtp, greedy);
  ExpectSame(plain, r, "mtp");
  ASSERT_GT(r.drafts.size(), 4u);
  EXPECT_EQ(r.first.stats.drafted_tokens > 0, true);

  // Both turns: the first's text is a prefix of the second's.
  std::vector<int32_t> text = prompt_;
  text.insert(text.end(), r.first.tokens.begin(), r.first.tokens.end());
  const size_t first_turn = text.size();
  text.insert(text.end(), prompt_.begin(), prompt_.begin() + 5);
  text.insert(text.end(), r.second.tokens.begin(), r.second.tokens.end());
  Model& m = engine_->model();
  auto cache = m.NewCache(engine_->context());
  auto mtp_cache = m.NewMtpCache(engine_->context());
  ASSERT_TRUE(cache.ok() && mtp_cache.ok());
  std::vector<int32_t> predicted;  // [p]: the MTP's argmax after pair p
  std::vector<float> row(size_t(m.config().vocab_size));
  const size_t step = size_t(m.max_step_tokens());
  for (size_t a = 0; a + 1 < text.size(); a += step) {
    const size_t n = std::min(step, text.size() - 1 - a);
    ASSERT_TRUE(m.Forward(std::span(text).subspan(a, n), **cache, true).ok());
    auto logits = m.ForwardMtp(std::span(text).subspan(a + 1, n), m.last_hidden(), **mtp_cache,
                               true);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    for (size_t i = 0; i < n; ++i) {
      engine_->backend().ReadF32(logits->RowSlice(int64_t(i), 1), row);
      predicted.push_back(Sampler::Argmax(row));
    }
  }
  size_t first_checked = 0, second_checked = 0;
  for (const auto& [context, draft] : r.drafts) {
    ASSERT_GE(context, 2);
    ASSERT_LE(size_t(context), text.size());
    EXPECT_EQ(draft, predicted[size_t(context - 2)]) << "context " << context;
    ++(size_t(context) <= first_turn ? first_checked : second_checked);
  }
  EXPECT_GT(first_checked, 4u);
  EXPECT_GT(second_checked, 4u);  // after reusing the first turn's MTP rows
}

// JSON-constrained output (structured output, tool arguments): each verify
// row is masked with the constraint's state after the rows before it, so
// drafts change nothing there either (SmolLM2: a real tokenizer).
TEST_P(SpeculativeGenerate, ConstrainedOutputIsThatOfPlainDecoding) {
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({
      "type": "object",
      "properties": {"name": {"type": "string"}, "tags": {"type": "array",
                     "items": {"type": "string"}}},
      "required": ["name", "tags"]})");
  auto vocab = VocabularyIndex::Build(engine_->tokenizer());
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto constraint = JsonConstraint::Create(schema, *vocab, engine_->StopTokens());
  ASSERT_TRUE(constraint.ok()) << constraint.status().message();
  prompt_ = engine_->Encode(
      "{\"name\": \"one two\", \"tags\": [\"one\", \"two\", \"one\", \"two\"]}\n"
      "{\"name\": \"one two\", \"tags\": [\"one\", \"two\", \"one\", \"two\"]}\n");
  auto run = [&](SpecKind kind, const SamplingParams& sampling) {
    JsonConstraintState state(*constraint);
    Generator g(engine_->model(), &engine_->tokenizer());
    auto seq = g.NewSequence(engine_->context());
    GenerateOptions o;
    o.max_new_tokens = 48;
    o.sampling = sampling;
    o.stop_tokens = engine_->StopTokens();
    o.constraint = &state;
    o.spec.kind = kind;
    auto r = g.Generate(*seq, prompt_, o, nullptr);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : GenerateResult{};
  };
  SamplingParams seeded;
  seeded.seed = 11;
  for (const SamplingParams& sp : {SamplingParams::Greedy(), seeded}) {
    const GenerateResult plain = run(SpecKind::kNone, sp);
    const GenerateResult ngram = run(SpecKind::kNgram, sp);
    EXPECT_EQ(plain.tokens, ngram.tokens);
    EXPECT_EQ(plain.text, ngram.text);
    EXPECT_GT(ngram.stats.drafted_tokens, 0);
    EXPECT_FALSE(nlohmann::json::parse(ngram.text, nullptr, false).is_discarded()) << ngram.text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SpeculativeGenerate,
    ::testing::Values(SpecCase{"llama_tiny", Golden("llama_tiny")},
                      SpecCase{"deepseek_v3", Golden("moe/deepseek_v3")},
                      SpecCase{"glm_moe_dsa", Golden("moe/glm_moe_dsa")},
                      // KDA layers: rejected drafts roll the recurrent state
                      // back to its checkpoint and replay the accepted rows.
                      SpecCase{"glm5_next", Golden("moe/glm5_next")},
                      SpecCase{"smollm2", std::string(ANYMOE_MODELS_DIR) +
                                              "/SmolLM2-135M-Instruct.Q4_1.gguf"},
                      SpecCase{"glm5_fp8_mtp", Golden("fp8/glm_moe_dsa"), true},
                      SpecCase{"deepseek_v3_fp8_mtp", Golden("fp8/deepseek_v3"), true},
                      SpecCase{"glm5_q8_0_gguf_mtp", Golden("mtp/glm_moe_dsa_mtp.gguf"), true}),
    [](const auto& info) { return info.param.name; });

// Verify rows equal plain steps only because a row's numbers do not depend on
// its step's size: on every SIMD target, with integer (q8_0) kernels, MLA +
// DSA and the MTP layer (the tiny GLM-5 GGUF).
std::vector<SpecCase> EveryTarget() {
  std::vector<SpecCase> cases;
  for (const std::string& t : testing::CpuTargetNames()) {
    cases.push_back({"glm5_q8_0_" + testing::TestNameOf(t), Golden("mtp/glm_moe_dsa_mtp.gguf"),
                     true, t});
    cases.push_back({"glm5_next_" + testing::TestNameOf(t), Golden("moe/glm5_next"), false, t});
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(CpuTargets, SpeculativeGenerate, ::testing::ValuesIn(EveryTarget()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace anymoe
