// The two forms of multi-head latent attention (--mla-form,
// models/blocks/mla_form.h). Forced expanded: a prompt's logits are the same
// bits whether it is prefilled at once, in chunks or token by token, and
// whatever head group the scratch budget allows. Auto: a decode step batched
// beside an expanded prefill gets the bits it gets alone, and so does the
// prefill; so do two prompts prefilled expanded in one step. The cost model's crossovers are those
// of DeepSeek-V3's and GLM-5's shapes; the forced form is refused where it cannot hold; the memory
// plan counts what the expanded form adds. (Agreement with transformers: moe_golden_test.cc,
// MlaForms.) Every model case runs on every CPU target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "models/config_loader.h"
#include "models/memory_plan.h"
#include "models/model.h"
#include "models/model_file.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

MlaConfig DeepSeekV3() {
  return MlaConfig{.q_lora_rank = 1536,
                   .kv_lora_rank = 512,
                   .qk_nope_head_dim = 128,
                   .qk_rope_head_dim = 64,
                   .v_head_dim = 128};
}
MlaConfig Glm5() {
  return MlaConfig{.q_lora_rank = 2048,
                   .kv_lora_rank = 512,
                   .qk_nope_head_dim = 192,
                   .qk_rope_head_dim = 64,
                   .v_head_dim = 256};
}

TEST(MlaFormCost, CrossoversOfTheRealShapes) {
  // Measured (docs/benchmarks.md) on DeepSeek-V3's widths at depth 4096: a
  // 512-token chunk 1.20x faster expanded, a 256-token one 0.96x, 128 0.67x;
  // at the start of a prompt every size 1.05-1.11x faster expanded.
  for (int64_t n_past : {4096, 32768, 131072}) {
    EXPECT_TRUE(ExpandedMlaIsCheaper(DeepSeekV3(), 128, 512, n_past)) << n_past;
    EXPECT_FALSE(ExpandedMlaIsCheaper(DeepSeekV3(), 128, 256, n_past)) << n_past;
    EXPECT_FALSE(ExpandedMlaIsCheaper(DeepSeekV3(), 128, 128, n_past)) << n_past;
    // GLM-5's 64 wider heads: never deep in a prompt.
    EXPECT_FALSE(ExpandedMlaIsCheaper(Glm5(), 64, 512, n_past)) << n_past;
  }
  for (int64_t t : {128, 256, 512}) {
    EXPECT_TRUE(ExpandedMlaIsCheaper(DeepSeekV3(), 128, t, 0)) << t;
    EXPECT_TRUE(ExpandedMlaIsCheaper(Glm5(), 64, t, 0)) << t;
  }
  // A decode step never expands the cache.
  EXPECT_FALSE(ExpandedMlaIsCheaper(DeepSeekV3(), 128, 1, 100));
  EXPECT_FALSE(ExpandedMlaIsCheaper(Glm5(), 64, 1, 100));
  // docs/models.md: 139K against 41K + 16.8M / T multiply-adds per (query,
  // key) for DeepSeek-V3; at T = 512 deep in the context that is 1.9x.
  const double ratio = AbsorbedMlaMacs(DeepSeekV3(), 128, 512, 1 << 20) /
                       ExpandedMlaMacs(DeepSeekV3(), 128, 512, 1 << 20);
  EXPECT_NEAR(ratio, 1.9, 0.05);
}

TEST(MlaFormCost, HeadGroupsFitTheBudget) {
  // DeepSeek-V3: 128 + 64 + 128 keys and 128 + 128 k_nope|v floats per head and key.
  EXPECT_EQ(ExpandedMlaHeadGroup(DeepSeekV3(), 128, 1024), 16);  // 1024 x 576 x 16 < 16M < x 32
  EXPECT_EQ(ExpandedMlaHeadGroup(DeepSeekV3(), 128, 4096), 4);
  EXPECT_EQ(ExpandedMlaHeadGroup(DeepSeekV3(), 128, 32768), 1);  // over budget: still one head
  EXPECT_EQ(ExpandedMlaHeadGroup(DeepSeekV3(), 128, 16), 128);
}

TEST(MlaFormParse, NamesTheFlag) {
  EXPECT_EQ(*ParseMlaForm("auto"), MlaForm::kAuto);
  const auto bad = ParseMlaForm("dense");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--mla-form dense"), std::string::npos);
}

Expected<std::unique_ptr<Model>> Load(const ModelFile& file, Backend& backend, MlaForm form) {
  return LoadModel(file, backend, LoadOptions{.max_step_tokens = 64, .mla_form = form});
}

TEST(MlaFormRefused, ExpandedWithDsaAndAnyFormWithoutMla) {
  auto be = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 1})).value();
  const auto dsa =
      std::move(OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa")).value();
  auto m = Load(dsa, *be, MlaForm::kExpanded);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("DSA"), std::string::npos) << m.status().message();
  EXPECT_TRUE(Load(dsa, *be, MlaForm::kAuto).ok());

  const auto gqa = std::move(OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny")).value();
  for (MlaForm f : {MlaForm::kExpanded, MlaForm::kAuto}) {
    auto g = Load(gqa, *be, f);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("no multi-head latent attention"), std::string::npos)
        << g.status().message();
  }
}

TEST(MlaFormPlan, CountsTheExpandedWeightsAndScratch) {
  const auto file =
      std::move(OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/moe/deepseek_v3")).value();
  LoadOptions absorbed{.max_step_tokens = 64, .context = 256};
  LoadOptions expanded = absorbed;
  expanded.mla_form = MlaForm::kExpanded;
  const MemoryPlan a = std::move(PlanMemory(file, absorbed)).value();
  const MemoryPlan e = std::move(PlanMemory(file, expanded)).value();
  const ModelConfig c = std::move(LoadModelConfig(file)).value();
  const MlaConfig& m = c.mla;
  const uint64_t kv_b =
      uint64_t(c.num_heads * (m.qk_nope_head_dim + m.v_head_dim) * m.kv_lora_rank) * sizeof(float);
  EXPECT_EQ(e.weights - a.weights, uint64_t(c.num_layers) * kv_b);
  // Scratch for a sequence's 256 latent rows, its keys and values.
  EXPECT_GE(e.activations - a.activations,
            256 * uint64_t(2 * m.kv_lora_rank + m.qk_rope_head_dim) * sizeof(float));
}

// Model, CPU target.
class ExpandedMla : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    target_.emplace(std::get<1>(GetParam()));
    auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + std::get<0>(GetParam()));
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
  }

  std::unique_ptr<Model> LoadWith(MlaForm form, int64_t budget_floats = kMlaExpandBudgetFloats) {
    LoadOptions o{.max_step_tokens = 64, .mla_form = form};
    o.mla_expand_budget_floats = budget_floats;
    auto m = LoadModel(file_, *backend_, o);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  std::vector<float> Read(const Tensor& t) {
    std::vector<float> v(size_t(t.elements()));
    backend_->ReadF32(t, v);
    return v;
  }

  // The logits of every prompt position, fed in steps of `step` tokens.
  std::vector<float> Prefill(Model& model, std::span<const int32_t> prompt, size_t step) {
    auto cache = std::move(model.NewCache(128)).value();
    std::vector<float> all;
    for (size_t i = 0; i < prompt.size(); i += step) {
      auto logits =
          model.Forward(prompt.subspan(i, std::min(step, prompt.size() - i)), *cache, true);
      EXPECT_TRUE(logits.ok()) << logits.status().message();
      if (!logits.ok()) return all;
      const auto rows = Read(*logits);
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }

  static bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  std::optional<testing::ScopedCpuTarget> target_;  // outlives the model
  ModelFile file_;
  std::unique_ptr<Backend> backend_;
};

std::vector<int32_t> Prompt(int64_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(int32_t((i * 37 + 11) % vocab));
  return p;
}

TEST_P(ExpandedMla, PromptBitsDoNotDependOnChunkingOrHeadGroups) {
  auto model = LoadWith(MlaForm::kExpanded);
  ASSERT_TRUE(model);
  const auto prompt = Prompt(model->config().vocab_size);
  const auto whole = Prefill(*model, prompt, prompt.size());
  ASSERT_EQ(whole.size(), prompt.size() * size_t(model->config().vocab_size));
  EXPECT_TRUE(SameBits(whole, Prefill(*model, prompt, 7)));
  EXPECT_TRUE(SameBits(whole, Prefill(*model, prompt, 1)));
  // A budget of one head's keys and values: one head per call.
  const MlaConfig& m = model->config().mla;
  const int64_t one_head = 256 * (2 * m.qk_nope_head_dim + m.qk_rope_head_dim + 2 * m.v_head_dim);
  ASSERT_EQ(ExpandedMlaHeadGroup(m, model->config().num_heads, 256, one_head), 1);
  auto per_head = LoadWith(MlaForm::kExpanded, one_head);
  ASSERT_TRUE(per_head);
  EXPECT_TRUE(SameBits(whole, Prefill(*per_head, prompt, 13)));
  // The absorbed form sums in another order: close, not the same bits.
  auto absorbed = LoadWith(MlaForm::kAbsorbed);
  const auto other = Prefill(*absorbed, prompt, prompt.size());
  ASSERT_EQ(other.size(), whole.size());
  float diff = 0;
  for (size_t i = 0; i < whole.size(); ++i) diff = std::max(diff, std::fabs(whole[i] - other[i]));
  EXPECT_LT(diff, 3e-5f);
}

TEST_P(ExpandedMla, AutoDecodeBesidePrefillGetsItsOwnBits) {
  auto model = LoadWith(MlaForm::kAuto);
  ASSERT_TRUE(model);
  const auto prompt = Prompt(model->config().vocab_size);
  const std::span<const int32_t> a_prompt = std::span(prompt).first(20),
                                 b_prompt = std::span(prompt).last(12);
  const int32_t next = 5;

  auto a = std::move(model->NewCache(128)).value();
  ASSERT_TRUE(model->Forward(a_prompt, *a, false).ok());
  const auto a_alone = Read(model->Forward({&next, 1}, *a, false).value());
  auto b = std::move(model->NewCache(128)).value();
  const auto b_alone = Read(model->Forward(b_prompt, *b, true).value());

  auto pool = std::move(model->NewPool(256)).value();
  KvCache a2(pool.get(), 128), b2(pool.get(), 128);
  ASSERT_TRUE(model->Forward(a_prompt, a2, false).ok());
  const Model::SequenceStep step[] = {{{&next, 1}, &a2, false}, {b_prompt, &b2, true}};
  const auto both = Read(model->ForwardBatch(step).value());
  const size_t vocab = size_t(model->config().vocab_size);
  ASSERT_EQ(both.size(), vocab * (1 + b_prompt.size()));
  EXPECT_TRUE(SameBits(std::vector<float>(both.begin(), both.begin() + vocab), a_alone));
  EXPECT_TRUE(SameBits(std::vector<float>(both.begin() + vocab, both.end()), b_alone));
}

// Two prompts prefilled in one step, one of them after an earlier chunk: each
// gets the bits it gets alone (the step's expanded segments share one scratch).
TEST_P(ExpandedMla, BatchedPrefillsGetTheirOwnBits) {
  auto model = LoadWith(MlaForm::kExpanded);
  ASSERT_TRUE(model);
  const auto prompt = Prompt(model->config().vocab_size);
  const std::span<const int32_t> a_first = std::span(prompt).first(9),
                                 a_next = std::span(prompt).subspan(9, 17),
                                 b_prompt = std::span(prompt).last(30);
  auto a = std::move(model->NewCache(128)).value();
  ASSERT_TRUE(model->Forward(a_first, *a, false).ok());
  const auto a_alone = Read(model->Forward(a_next, *a, true).value());
  auto b = std::move(model->NewCache(128)).value();
  const auto b_alone = Read(model->Forward(b_prompt, *b, true).value());

  auto pool = std::move(model->NewPool(256)).value();
  KvCache a2(pool.get(), 128), b2(pool.get(), 128);
  ASSERT_TRUE(model->Forward(a_first, a2, false).ok());
  const Model::SequenceStep step[] = {{a_next, &a2, true}, {b_prompt, &b2, true}};
  const auto both = Read(model->ForwardBatch(step).value());
  const size_t split = a_alone.size();
  ASSERT_EQ(both.size(), split + b_alone.size());
  EXPECT_TRUE(SameBits(std::vector<float>(both.begin(), both.begin() + split), a_alone));
  EXPECT_TRUE(SameBits(std::vector<float>(both.begin() + split, both.end()), b_alone));
}

INSTANTIATE_TEST_SUITE_P(Models, ExpandedMla,
                         ::testing::Combine(::testing::Values("moe/deepseek_v3",
                                                              "moe_gguf/glm4_moe_lite.gguf"),
                                            ::testing::ValuesIn(testing::CpuTargetNames())),
                         [](const auto& info) {
                           return testing::TestNameOf(std::get<0>(info.param)) + "_" +
                                  testing::TestNameOf(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace anymoe
