// The runner on the tiny llama checkpoint: each repetition is timed, the model
// is described like llama-bench does, and a test longer than the context is a
// clean error rather than a cache overflow.
#include "bench/bench_runner.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

std::unique_ptr<Engine> LoadTiny(int64_t context = 4096) {
  EngineOptions o;
  o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny";
  o.threads = 1;
  o.context = context;
  o.max_step_tokens = 8;
  o.progress = false;
  auto e = Engine::Load(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(BenchRunner, TimesEachRepetition) {
  auto engine = LoadTiny();
  ASSERT_NE(engine, nullptr);
  BenchRunner runner(*engine, /*sequences=*/4);
  for (BenchTest test : {BenchTest{20, 0}, BenchTest{0, 5}, BenchTest{8, 4}, BenchTest{0, 3, 4},
                         BenchTest{4, 0, 1, 20}, BenchTest{0, 3, 2, 20}}) {
    auto samples = runner.Measure(test, 3);
    ASSERT_TRUE(samples.ok()) << samples.status().message();
    ASSERT_EQ(samples->size(), 3u);
    for (uint64_t ns : *samples) EXPECT_GT(ns, 0u);
  }
}

TEST(BenchRunner, DescribesTheModel) {
  auto engine = LoadTiny();
  ASSERT_NE(engine, nullptr);
  const ModelDescription d = DescribeModel(*engine);
  EXPECT_NE(d.filename.find("llama_tiny"), std::string::npos);
  EXPECT_EQ(d.type.substr(0, 6), "llama ");
  EXPECT_NE(d.type.find("F32"), std::string::npos) << d.type;
  uint64_t bytes = 0;
  int64_t elements = 0;
  for (const TensorInfo& t : engine->file().tensors().tensors()) {
    bytes += t.bytes;
    elements += t.elements();
  }
  EXPECT_EQ(d.size_bytes, bytes);
  EXPECT_EQ(d.n_params, elements);
}

TEST(BenchRunner, RejectsTestsThatDoNotFit) {
  auto engine = LoadTiny(/*context=*/16);
  ASSERT_NE(engine, nullptr);
  BenchRunner runner(*engine);
  auto too_long = runner.Measure({12, 8}, 1);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("20 tokens"), std::string::npos)
      << too_long.status().message();
  EXPECT_FALSE(runner.Measure({0, 0}, 1).ok());
  // The depth counts: 10 tokens already in the cache + 8 generated > 16.
  auto too_deep = runner.Measure({0, 8, 1, 10}, 1);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("18 tokens"), std::string::npos)
      << too_deep.status().message();
  EXPECT_TRUE(runner.Measure({0, 8, 1, 8}, 1).ok());
  EXPECT_FALSE(runner.Measure({0, 4, 1, -1}, 1).ok());
  // Several sequences only for tg, and no more than a step takes (8 here).
  EXPECT_FALSE(runner.Measure({4, 2, 2}, 1).ok());
  auto too_wide = runner.Measure({0, 2, 9}, 1);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.status().message().find("at most 8 tokens"), std::string::npos)
      << too_wide.status().message();
  EXPECT_FALSE(runner.Measure({4, 0}, 0).ok());
}

}  // namespace
}  // namespace anymoe

namespace anymoe {
namespace {

// tg @ prompt: generation from a real prompt, with or without drafts; every
// run generates exactly n tokens, and drafts are proposed (the random model
// copies little, so few or none are accepted).
TEST(BenchRunner, GeneratesFromThePromptWithDrafts) {
  auto engine = LoadTiny();
  ASSERT_NE(engine, nullptr);
  BenchRunner runner(*engine);
  BenchTest plain{0, 24, 1, 0, "none", 0};
  EXPECT_FALSE(runner.Measure(plain, 1).ok());  // no prompt yet
  std::vector<int32_t> prompt = {5, 9, 13, 17, 21};
  prompt.resize(17, 5);
  runner.SetPrompt(prompt);
  auto samples = runner.Measure(plain, 2);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  EXPECT_EQ(runner.drafted(), 0);
  BenchTest spec{0, 24, 1, 0, "ngram", 4};
  EXPECT_EQ(spec.Name(), "tg24 @ prompt ngram/4");
  samples = runner.Measure(spec, 2);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  EXPECT_EQ(samples->size(), 2u);
  EXPECT_GT(runner.drafted(), 0);
  EXPECT_LE(runner.accepted(), runner.drafted());
}

// tg @ prompt with MTP drafts (the tiny GLM-5 with its NextN layer): the
// runner keeps the MTP cache across runs; drafts are made and verified.
TEST(BenchRunner, GeneratesFromThePromptWithMtpDrafts) {
  EngineOptions o;
  o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/mtp/glm_moe_dsa_mtp.gguf";
  o.threads = 1;
  o.context = 128;
  o.max_step_tokens = 32;
  o.load_mtp = true;
  o.progress = false;
  auto engine = Engine::Load(o);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  BenchRunner runner(**engine);
  runner.SetPrompt({244, 401, 438, 344, 55, 123, 365, 94, 435, 179, 17, 80, 70});
  for (const char* spec : {"none", "mtp"}) {
    auto samples = runner.Measure(BenchTest{0, 16, 1, 0, spec, 2}, 2);
    ASSERT_TRUE(samples.ok()) << spec << ": " << samples.status().message();
    EXPECT_EQ(samples->size(), 2u);
  }
  EXPECT_GT(runner.drafted(), 0);
}


// DSA against dense MLA on one model (bench --index-topk): the variants run
// round-robin, each its own samples; the model's own top-k comes back after;
// a top-k above the loaded one, variants that differ in more than the top-k,
// and a top-k for a model without DSA are errors.
TEST(BenchRunner, InterleavesIndexTopKVariants) {
  EngineOptions o;
  o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa_dense";  // index_topk 64
  o.threads = 1;
  o.context = 64;
  o.max_step_tokens = 8;
  o.progress = false;
  auto engine = Engine::Load(o);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  BenchRunner runner(**engine);
  BenchTest sparse{8, 0, 1, 24}, dense = sparse;
  sparse.index_topk = 4;
  dense.index_topk = 64;
  EXPECT_EQ(sparse.Name(), "pp8 @ d24 topk4");
  const BenchTest pair[] = {sparse, dense};
  auto samples = runner.MeasureInterleaved(pair, 2);
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 2u);
  for (const auto& s : *samples) {
    ASSERT_EQ(s.size(), 2u);
    for (uint64_t ns : s) EXPECT_GT(ns, 0u);
  }
  EXPECT_EQ((*engine)->model().config().dsa.topk, 64);

  BenchTest above = sparse;
  above.index_topk = 65;
  auto too_high = runner.Measure(above, 1);
  ASSERT_FALSE(too_high.ok());
  EXPECT_NE(too_high.status().message().find("above the model's own 64"), std::string::npos)
      << too_high.status().message();
  BenchTest deeper = dense;
  deeper.n_depth = 16;
  const BenchTest mixed[] = {sparse, deeper};
  EXPECT_FALSE(runner.MeasureInterleaved(mixed, 1).ok());
  EXPECT_EQ((*engine)->model().config().dsa.topk, 64);

  auto llama = LoadTiny();
  ASSERT_NE(llama, nullptr);
  BenchRunner plain(*llama);
  auto no_dsa = plain.Measure(sparse, 1);
  ASSERT_FALSE(no_dsa.ok());
  EXPECT_NE(no_dsa.status().message().find("no DSA"), std::string::npos)
      << no_dsa.status().message();
}

}  // namespace
}  // namespace anymoe
