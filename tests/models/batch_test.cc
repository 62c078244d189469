// Batched steps over a shared paged KV pool: several sequences of different
// lengths in one ForwardBatch give the same logits as each run alone (prefill
// and decode mixed in one step), with an f32 and an f16 cache; blocks return
// to the pool when a sequence ends, and a full pool is an error that changes
// nothing. Every case runs on every CPU kernel target this machine has.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "models/model.h"
#include "models/model_file.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

class Batching
    : public ::testing::TestWithParam<std::tuple<std::string, DType, std::string>> {
 protected:
  void SetUp() override {
    const auto& [name, kv_type, cpu_target] = GetParam();
    target_.emplace(cpu_target);
    auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + name);
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    model_ = std::move(LoadModel(file_, *backend_,
                                 LoadOptions{.max_step_tokens = 64, .kv_type = kv_type}))
                 .value();
  }

  std::vector<float> Read(const Tensor& t) {
    std::vector<float> v(size_t(t.elements()));
    backend_->ReadF32(t, v);
    return v;
  }

  std::optional<testing::ScopedCpuTarget> target_;  // outlives the model
  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(Batching, BatchedStepsEqualSeparateRuns) {
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 6, 7, 8, 9, 10, 11, 12, 13}, {40, 41, 42}, {100, 3, 99, 7, 7, 7, 250, 17, 18, 19, 20, 21}};
  const std::vector<int32_t> next = {33, 44, 55};
  const int64_t vocab = model_->config().vocab_size;

  // Alone: prefill, then one decode step each.
  std::vector<std::vector<float>> alone_prefill, alone_decode;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto cache = std::move(model_->NewCache(64)).value();
    alone_prefill.push_back(Read(model_->Forward(prompts[i], *cache, true).value()));
    alone_decode.push_back(Read(model_->Forward({&next[i], 1}, *cache, false).value()));
  }

  // Together in one pool: step 1 prefills sequences 0 and 1; step 2 decodes 0 and
  // 1 while prefilling 2 (continuous batching joins a request between steps).
  auto pool = std::move(model_->NewPool(256)).value();
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int i = 0; i < 3; ++i) caches.push_back(std::make_unique<KvCache>(pool.get(), 64));
  const Model::SequenceStep first[] = {{prompts[0], caches[0].get(), true},
                                       {prompts[1], caches[1].get(), true}};
  const auto step1 = Read(model_->ForwardBatch(first).value());
  const Model::SequenceStep second[] = {{{&next[0], 1}, caches[0].get(), false},
                                        {prompts[2], caches[2].get(), true},
                                        {{&next[1], 1}, caches[1].get(), false}};
  const auto step2 = Read(model_->ForwardBatch(second).value());

  auto max_diff = [](const float* a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  };
  ASSERT_EQ(step1.size(), (prompts[0].size() + prompts[1].size()) * size_t(vocab));
  EXPECT_LT(max_diff(step1.data(), alone_prefill[0]), 1e-5f);
  EXPECT_LT(max_diff(step1.data() + prompts[0].size() * vocab, alone_prefill[1]), 1e-5f);
  ASSERT_EQ(step2.size(), (2 + prompts[2].size()) * size_t(vocab));
  EXPECT_LT(max_diff(step2.data(), alone_decode[0]), 1e-5f);
  EXPECT_LT(max_diff(step2.data() + vocab, alone_prefill[2]), 1e-5f);
  EXPECT_LT(max_diff(step2.data() + (1 + prompts[2].size()) * vocab, alone_decode[1]), 1e-5f);

  const int64_t used = pool->used_blocks();
  EXPECT_GT(used, 0);
  caches[2].reset();  // a finished request returns its blocks at once
  EXPECT_LT(pool->used_blocks(), used);
  caches.clear();
  EXPECT_EQ(pool->used_blocks(), 0);
}

TEST_P(Batching, FullPoolIsAnErrorThatChangesNothing) {
  auto pool = std::move(model_->NewPool(32)).value();  // two blocks of 16 tokens
  KvCache a(pool.get(), 64), b(pool.get(), 64);
  std::vector<int32_t> prompt(20, 7);
  ASSERT_TRUE(model_->Forward(prompt, a, false).ok());  // takes both blocks
  auto r = model_->Forward({prompt.data(), 4}, b, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KV cache full"), std::string::npos) << r.status().message();
  EXPECT_EQ(b.length(), 0);
  EXPECT_EQ(a.length(), 20);
}

INSTANTIATE_TEST_SUITE_P(Models, Batching,
                         ::testing::Combine(::testing::Values("llama_tiny", "moe/glm4_moe",
                                                              "moe/glm_moe_dsa", "moe/deepseek_v3"),
                                            ::testing::Values(DType::kF32, DType::kF16),
                                            ::testing::ValuesIn(testing::CpuTargetNames())),
                         [](const auto& info) {
                           return testing::TestNameOf(std::get<0>(info.param)) + "_kv_" +
                                  std::string(Name(std::get<1>(info.param))) + "_" +
                                  testing::TestNameOf(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace anymoe
