// The MoE architectures against transformers 5.24 (tests/golden/moe, from
// tools/gen_moe_golden.py): logits over the whole 40-token prompt, the greedy
// 16-token (deepseek_v32, kimi_k25: 24) continuation and its logits, a 16-token prefill followed by
// cached decode (and a 2-token one, so DSA's key count crosses index_topk while decoding), the
// experts each router chose for every token, and the keys each DSA indexer kept for every query.
// Every case runs on every CPU kernel target this machine has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/npy.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

// f32 throughout; observed differences are below 1e-5. Tight on purpose: using
// rms_norm_eps instead of 1e-6 in the MLA latent norms (where vLLM and HF differ)
// moves these logits by 5e-5 to 8e-5, and must fail.
constexpr float kTolerance = 3e-5f;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<float> ReadF32(const std::string& path) { return ReadNpy(path)->F32().value(); }

float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// "name" runs tests/golden/moe/name (HF safetensors); "gguf/name" runs the same
// weights as converted by llama.cpp (tests/golden/moe_gguf/name.gguf) against
// the same transformers goldens; a leading "expanded/" or "auto/" loads with
// that --mla-form. The second parameter is the CPU kernel target.
class MoeGolden : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    target_.emplace(std::get<1>(GetParam()));
    std::string name = std::get<0>(GetParam());
    MlaForm form = MlaForm::kAbsorbed;
    if (const size_t slash = name.find('/'); slash != std::string::npos) {
      if (auto f = ParseMlaForm(name.substr(0, slash)); f.ok()) {
        form = *f;
        name = name.substr(slash + 1);
      }
    }
    std::string path = std::string(ANYMOE_GOLDEN_DIR) + "/moe/" + name;
    if (name.starts_with("gguf/")) {
      name = name.substr(5);
      path = std::string(ANYMOE_GOLDEN_DIR) + "/moe_gguf/" + name + ".gguf";
    }
    dir_ = std::string(ANYMOE_GOLDEN_DIR) + "/moe/" + name;
    golden_ = ReadJson(dir_ + "/golden.json");
    prompt_ = golden_["prompt_ids"].get<std::vector<int32_t>>();
    auto file = OpenModelFile(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    auto model = LoadModel(file_, *backend_, LoadOptions{.max_step_tokens = 64, .mla_form = form});
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(model).value();
    vocab_ = model_->config().vocab_size;
  }

  // Feeds `prompt_` in chunks of `first` then 1 token at a time; returns every
  // position's logits.
  std::vector<float> RunPrompt(size_t first) {
    auto cache = model_->NewCache(128);
    EXPECT_TRUE(cache.ok());
    std::vector<float> all;
    for (size_t i = 0; i < prompt_.size();) {
      const size_t n = i == 0 ? first : 1;
      auto logits = model_->Forward(std::span(prompt_).subspan(i, n), **cache, true);
      EXPECT_TRUE(logits.ok()) << logits.status().message();
      if (!logits.ok()) return all;
      std::vector<float> rows(size_t(logits->elements()));
      backend_->ReadF32(*logits, rows);
      all.insert(all.end(), rows.begin(), rows.end());
      i += n;
    }
    return all;
  }

  std::optional<testing::ScopedCpuTarget> target_;  // outlives the model
  std::string dir_;
  json golden_;
  std::vector<int32_t> prompt_;
  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  int64_t vocab_ = 0;
};

TEST_P(MoeGolden, PromptLogitsMatch) {
  const auto ours = RunPrompt(prompt_.size());
  const float diff = MaxAbsDiff(ours, ReadF32(dir_ + "/logits.npy"));
  EXPECT_LT(diff, kTolerance);
  std::printf("[ %s ] prompt logits max |diff| = %.3g\n", std::get<0>(GetParam()).c_str(), diff);
}

TEST_P(MoeGolden, PrefillThenCachedDecodeMatches) {
  EXPECT_LT(MaxAbsDiff(RunPrompt(16), ReadF32(dir_ + "/prefill16_logits.npy")), kTolerance);
  if (std::filesystem::exists(dir_ + "/prefill2_logits.npy")) {
    EXPECT_LT(MaxAbsDiff(RunPrompt(2), ReadF32(dir_ + "/prefill2_logits.npy")), kTolerance);
  }
}

TEST_P(MoeGolden, GreedyContinuationMatches) {
  Generator gen(*model_, nullptr);
  auto seq = gen.NewSequence(128);
  ASSERT_TRUE(seq.ok());
  GenerateOptions opt;
  const auto want = golden_["greedy_ids"].get<std::vector<int32_t>>();  // 16, or 24
  opt.max_new_tokens = int(want.size());
  opt.sampling = SamplingParams::Greedy();
  opt.record_logits = true;
  auto result = gen.Generate(*seq, prompt_, opt, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->tokens, want);
  EXPECT_LT(MaxAbsDiff(result->logits, ReadF32(dir_ + "/decode_logits.npy")), kTolerance);
}

TEST_P(MoeGolden, RouterChoosesTheReferenceExperts) {
  std::map<int64_t, std::vector<std::vector<int32_t>>> chosen;
  ForwardObserver observer;
  observer.on_route = [&](int64_t layer, std::span<const int32_t> ids, int64_t k) {
    for (size_t t = 0; t < ids.size() / size_t(k); ++t) {
      std::vector<int32_t> e(ids.begin() + t * k, ids.begin() + (t + 1) * k);
      std::sort(e.begin(), e.end());
      chosen[layer].push_back(e);
    }
  };
  model_->SetObserver(&observer);
  RunPrompt(prompt_.size());
  model_->SetObserver(nullptr);
  const json want = ReadJson(dir_ + "/router.json");
  ASSERT_EQ(chosen.size(), want.size());
  for (const auto& [layer, ids] : want.items()) {
    EXPECT_EQ(chosen[std::stoll(layer)], ids.get<std::vector<std::vector<int32_t>>>())
        << "layer " << layer;
  }
}

TEST_P(MoeGolden, RoutingStatsCountEveryTokenTopKTimes) {
  model_->ResetRoutingStats();
  RunPrompt(prompt_.size());
  const RoutingStats stats = model_->routing_stats();
  ASSERT_EQ(stats.layers.size(), size_t(model_->config().num_moe_layers()));
  for (const auto& counts : stats.counts) {
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    EXPECT_EQ(total, int64_t(prompt_.size()) * stats.experts_per_token);
  }
}

using DsaGolden = MoeGolden;

TEST_P(DsaGolden, IndexerKeepsTheReferenceKeys) {
  std::map<int64_t, std::vector<std::vector<int32_t>>> kept;
  ForwardObserver observer;
  observer.on_key_selection = [&](int64_t layer, const KeySelection& s) {
    for (size_t t = 0; t < s.counts.size() && kept[layer].size() < prompt_.size(); ++t) {
      const int32_t* row = s.keys.data() + t * size_t(s.stride);
      kept[layer].emplace_back(row, row + s.counts[t]);
    }
  };
  model_->SetObserver(&observer);
  RunPrompt(prompt_.size());
  model_->SetObserver(nullptr);
  const json want = ReadJson(dir_ + "/dsa_topk.json");
  for (const auto& [layer, keys] : want.items()) {
    EXPECT_EQ(kept[std::stoll(layer)], keys.get<std::vector<std::vector<int32_t>>>())
        << "layer " << layer;
  }
  // Shared layers reuse the set of the full layer before them.
  for (const auto& [shared, full] : golden_["dsa_shared_layers"].items()) {
    (void)full;
    EXPECT_FALSE(kept[std::stoll(shared)].empty());
  }
}

std::string TestName(const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
  return testing::TestNameOf(std::get<0>(info.param)) + "_" +
         testing::TestNameOf(std::get<1>(info.param));
}

const auto kTargets = ::testing::ValuesIn(testing::CpuTargetNames());

INSTANTIATE_TEST_SUITE_P(
    HfSafetensors, MoeGolden,
    ::testing::Combine(::testing::Values("glm_moe_dsa", "glm_moe_dsa_dense", "glm_moe_dsa_dv20",
                                         "glm4_moe", "glm4_moe_air", "glm4_moe_bf16",
                                         "glm4_moe_fused", "glm4_moe_lite", "deepseek_v3",
                                         "deepseek_v32", "kimi_k25", "qwen3_moe", "mixtral"),
                       kTargets),
    TestName);
// qwen3_moe is missing: llama.cpp's converter cannot map its dense layer 0.
INSTANTIATE_TEST_SUITE_P(
    LlamaCppGguf, MoeGolden,
    ::testing::Combine(::testing::Values("gguf/glm_moe_dsa", "gguf/glm4_moe", "gguf/glm4_moe_lite",
                                         "gguf/deepseek_v3", "gguf/deepseek_v32", "gguf/kimi_k25",
                                         "gguf/mixtral"),
                       kTargets),
    TestName);
// The MLA models in the expanded form (DSA's only in auto: forcing it is
// refused) against the same goldens: transformers computes this form.
INSTANTIATE_TEST_SUITE_P(
    MlaForms, MoeGolden,
    ::testing::Combine(::testing::Values("expanded/deepseek_v3", "expanded/glm4_moe_lite",
                                         "expanded/gguf/deepseek_v3", "auto/glm_moe_dsa",
                                         "auto/glm_moe_dsa_dense", "auto/gguf/glm_moe_dsa",
                                         "auto/deepseek_v32", "auto/gguf/deepseek_v32",
                                         "expanded/kimi_k25", "expanded/gguf/kimi_k25"),
                       kTargets),
    TestName);
INSTANTIATE_TEST_SUITE_P(
    Architectures, DsaGolden,
    ::testing::Combine(::testing::Values("glm_moe_dsa", "glm_moe_dsa_dense", "glm_moe_dsa_dv20",
                                         "gguf/glm_moe_dsa", "deepseek_v32", "gguf/deepseek_v32"),
                       kTargets),
    TestName);

}  // namespace
}  // namespace anymoe

namespace anymoe {
namespace {

// With index_topk >= every sequence length DSA keeps every key: the GLM-5 model
// must then equal the same weights run as plain MLA (glm4_moe_lite, no indexer).
TEST(DsaNoOp, EqualsDenseMlaOnTheSameWeights) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(ANYMOE_GOLDEN_DIR) / "moe" / "glm_moe_dsa_dense";
  const fs::path dst =
      fs::temp_directory_path() / ("anymoe_dense_mla_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  fs::create_symlink(src / "model.safetensors", dst / "model.safetensors");
  json config = ReadJson((src / "config.json").string());
  ASSERT_GE(config["index_topk"].get<int64_t>(), 40);
  config["model_type"] = "glm4_moe_lite";
  std::ofstream((dst / "config.json").string()) << config.dump();

  auto run = [](const std::string& dir) {
    auto file = OpenModelFile(dir);
    EXPECT_TRUE(file.ok()) << file.status().message();
    auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    auto model = std::move(LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 64})).value();
    EXPECT_EQ(model->config().dsa.topk > 0, dir.find("anymoe_dense_mla") == std::string::npos);
    auto cache = std::move(model->NewCache(64)).value();
    const auto prompt = ReadJson(std::string(ANYMOE_GOLDEN_DIR) +
                                 "/moe/glm_moe_dsa_dense/golden.json")["prompt_ids"]
                            .get<std::vector<int32_t>>();
    Tensor logits = model->Forward(prompt, *cache, true).value();
    std::vector<float> out(size_t(logits.elements()));
    backend->ReadF32(logits, out);
    return out;
  };
  // Every key kept: MlaAttention runs the dense prefill kernel plain MLA runs,
  // so the bits are the same.
  const auto dsa = run(src.string()), mla = run(dst.string());
  EXPECT_EQ(dsa, mla);
  fs::remove_all(dst);
}

}  // namespace
}  // namespace anymoe

namespace anymoe {
namespace {

// Model::SetIndexTopK: the same weights loaded with index_topk 64 and lowered
// to 4 at run time are the index_topk-4 model, against transformers' logits and
// key sets for that config; raised back, the dense golden again. Values outside
// [1, the loaded 64] change nothing.
TEST(DsaIndexTopK, LoweredAtRunTimeMatchesTheReferenceOfThatTopK) {
  const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/moe/";
  auto file = OpenModelFile(dir + "glm_moe_dsa_dense");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
  auto model = std::move(LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 64})).value();
  ASSERT_EQ(model->config().dsa.topk, 64);
  const auto prompt =
      ReadJson(dir + "glm_moe_dsa/golden.json")["prompt_ids"].get<std::vector<int32_t>>();
  std::map<int64_t, std::vector<std::vector<int32_t>>> kept;
  ForwardObserver observer;
  observer.on_key_selection = [&](int64_t layer, const KeySelection& s) {
    // The view spans the step buffers (max_step_tokens rows): the prompt's first.
    for (size_t t = 0; t < prompt.size(); ++t) {
      const int32_t* row = s.keys.data() + t * size_t(s.stride);
      kept[layer].emplace_back(row, row + s.counts[t]);
    }
  };
  auto run = [&] {
    kept.clear();
    model->SetObserver(&observer);
    auto cache = std::move(model->NewCache(64)).value();
    Tensor logits = model->Forward(prompt, *cache, true).value();
    model->SetObserver(nullptr);
    std::vector<float> out(size_t(logits.elements()));
    backend->ReadF32(logits, out);
    return out;
  };
  for (int64_t bad : {int64_t(0), int64_t(-3), int64_t(65)}) {
    const Status st = model->SetIndexTopK(bad);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("[1, 64]"), std::string::npos) << st.message();
    EXPECT_EQ(model->config().dsa.topk, 64);
  }
  ASSERT_TRUE(model->SetIndexTopK(4).ok());
  EXPECT_LT(MaxAbsDiff(run(), ReadF32(dir + "glm_moe_dsa/logits.npy")), kTolerance);
  const json want = ReadJson(dir + "glm_moe_dsa/dsa_topk.json");
  ASSERT_FALSE(want.empty());
  for (const auto& [layer, keys] : want.items()) {
    const auto& got = kept[std::stoll(layer)];
    const auto ref = keys.get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(got.size(), ref.size()) << "layer " << layer;
    for (size_t t = 0; t < ref.size(); ++t) {
      EXPECT_EQ(got[t], ref[t]) << "layer " << layer << ", query " << t;
    }
  }
  ASSERT_TRUE(model->SetIndexTopK(64).ok());
  EXPECT_LT(MaxAbsDiff(run(), ReadF32(dir + "glm_moe_dsa_dense/logits.npy")), kTolerance);

  // A model without DSA has nothing to set.
  auto llama = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  auto plain = std::move(LoadModel(*llama, *backend, LoadOptions{})).value();
  EXPECT_FALSE(plain->SetIndexTopK(4).ok());
}

}  // namespace
}  // namespace anymoe
