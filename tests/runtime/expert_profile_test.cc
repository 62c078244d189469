// Expert profiles (runtime/expert_profile.h): tokens routed, probability mass
// and REAP saliency equal transformers' on the golden prompt of three MoE
// checkpoints (tests/golden/expert_profile, tools/gen_expert_profile_golden.py:
// softmax, sigmoid with groups and bias, Mixtral); the counts equal a routing
// trace's of the same steps (another path: the router's chosen ids); the JSON
// round-trips; a profile is refused by another model and when malformed.
#include "runtime/expert_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "models/model.h"
#include "models/model_file.h"
#include "models/model_fingerprint.h"
#include "runtime/routing_trace.h"
#include "testing/loaded_model.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

const std::string kGolden = std::string(ANYMOE_GOLDEN_DIR) + "/";

using Loaded = testing::LoadedModel;

Loaded Load(const std::string& path) {
  BackendOptions options{.num_threads = 2};
  options.exact_matmul = true;
  return testing::LoadCpuModel(path, options, LoadOptions{.max_step_tokens = 64});
}

// A prefill of 24 tokens, 6 decode steps, and a batched step of two sequences.
void RunSteps(Model& m) {
  const int64_t vocab = m.config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(int32_t((i * 37 + 11) % vocab));
  auto cache = std::move(m.NewCache(64)).value();
  ASSERT_TRUE(m.Forward(prompt, *cache, false).ok());
  for (int i = 0; i < 6; ++i) {
    const int32_t token = int32_t((i * 53 + 7) % vocab);
    ASSERT_TRUE(m.Forward({&token, 1}, *cache, false).ok());
  }
  auto other = std::move(m.NewCache(64)).value();
  const int32_t next = 5;
  const std::vector<int32_t> fresh = {9, 8, 7, 6, 5};
  const Model::SequenceStep steps[] = {{{&next, 1}, cache.get(), false},
                                       {fresh, other.get(), true}};
  ASSERT_TRUE(m.ForwardBatch(steps).ok());
}

class ExpertProfileTest : public testing::TempDirTest {};

TEST_F(ExpertProfileTest, MatchesTransformersOnTheGoldenPrompt) {
  for (const char* name : {"qwen3_moe", "glm4_moe", "mixtral"}) {
    SCOPED_TRACE(name);
    std::ifstream in(kGolden + "expert_profile/" + name + ".json");
    const nlohmann::json golden = nlohmann::json::parse(in);
    Loaded l = Load(kGolden + "moe/" + name);
    ExpertProfiler profiler(l.model->config(), name, ModelFingerprint(l.file), "test");
    l.model->SetObserver(&profiler.observer());
    const auto prompt = golden["prompt_ids"].get<std::vector<int32_t>>();
    auto cache = std::move(l.model->NewCache(64)).value();
    ASSERT_TRUE(l.model->Forward(prompt, *cache, false).ok());
    const ExpertProfile p = profiler.Snapshot();
    EXPECT_EQ(p.tokens, int64_t(prompt.size()));
    ASSERT_EQ(p.layers.size(), golden["layers"].size());
    for (size_t i = 0; i < p.layers.size(); ++i) {
      const nlohmann::json& g = golden["layers"][i];
      const LayerProfile& got = p.layers[i];
      EXPECT_EQ(got.layer, g["layer"].get<int64_t>());
      EXPECT_EQ(got.tokens_routed, g["tokens_routed"].get<std::vector<int64_t>>());
      const auto mass = g["probability_mass"].get<std::vector<double>>();
      const auto saliency = g["saliency"].get<std::vector<double>>();
      for (size_t x = 0; x < mass.size(); ++x) {
        EXPECT_NEAR(got.probability_mass[x], mass[x], 1e-4 * (1 + mass[x])) << "expert " << x;
        EXPECT_NEAR(got.saliency[x], saliency[x], 1e-4 * (1 + saliency[x])) << "expert " << x;
      }
    }
  }
}

TEST_F(ExpertProfileTest, CountsEqualARoutingTraceOfTheSameSteps) {
  Loaded l = Load(kGolden + "moe_gguf/glm4_moe.gguf");
  RoutingTrace trace;
  l.model->SetObserver(&trace.observer());
  RunSteps(*l.model);
  ASSERT_TRUE(trace.Write(Path("trace.npy")).ok());
  ExpertProfiler profiler(l.model->config(), "glm4_moe", ModelFingerprint(l.file), "test");
  l.model->SetObserver(&profiler.observer());
  RunSteps(*l.model);
  l.model->SetObserver(nullptr);
  const ExpertProfile p = profiler.Snapshot();

  auto npy = ReadNpy(Path("trace.npy"));
  ASSERT_TRUE(npy.ok()) << npy.status().message();
  ASSERT_EQ(npy->shape.size(), 3u);
  const int64_t tokens = npy->shape[0], layers = npy->shape[1], k = npy->shape[2];
  EXPECT_EQ(p.tokens, tokens);
  EXPECT_EQ(tokens, 24 + 6 + 1 + 5);
  ASSERT_EQ(int64_t(p.layers.size()), layers);
  const int32_t* ids = reinterpret_cast<const int32_t*>(npy->bytes.data());
  for (int64_t j = 0; j < layers; ++j) {
    std::vector<int64_t> counts(size_t(p.num_experts), 0);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < k; ++i) ++counts[size_t(ids[(t * layers + j) * k + i])];
    }
    EXPECT_EQ(p.layers[size_t(j)].tokens_routed, counts) << "moe layer " << j;
    double mass = 0;
    for (double m : p.layers[size_t(j)].probability_mass) mass += m;
    EXPECT_NEAR(mass, double(tokens), 1e-6 * double(tokens));  // one per token
  }
}

TEST_F(ExpertProfileTest, RoundTripsAndRefusesAnotherModel) {
  Loaded l = Load(kGolden + "moe_gguf/glm4_moe.gguf");
  const std::string fingerprint = ModelFingerprint(l.file);
  EXPECT_EQ(fingerprint.size(), 16u);
  ExpertProfiler profiler(l.model->config(), "glm4_moe.gguf", fingerprint, "test");
  l.model->SetObserver(&profiler.observer());
  RunSteps(*l.model);
  const ExpertProfile p = profiler.Snapshot();
  ASSERT_TRUE(p.Write(Path("p.json")).ok());
  auto back = ExpertProfile::Load(Path("p.json"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), p.ToJson());
  EXPECT_TRUE(back->CheckModel(fingerprint, l.model->config()).ok());

  // The same architecture in another dtype, and another architecture.
  auto q8 = OpenModelFile(kGolden + "moe_gguf/glm4_moe.q8_0.gguf");
  ASSERT_TRUE(q8.ok());
  EXPECT_NE(ModelFingerprint(*q8), fingerprint);
  Status st = back->CheckModel(ModelFingerprint(*q8), l.model->config());
  EXPECT_EQ(st.code(), "profile_model_mismatch") << st.message();
  Loaded mixtral = Load(kGolden + "moe_gguf/mixtral.gguf");
  st = back->CheckModel(fingerprint, mixtral.model->config());
  EXPECT_EQ(st.code(), "profile_model_mismatch") << st.message();
  // Stable across opens of the same file.
  auto again = OpenModelFile(kGolden + "moe_gguf/glm4_moe.gguf");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ModelFingerprint(*again), fingerprint);

  // Ranked: every (layer, expert) once, counts not increasing.
  const auto ranked = p.Ranked(ExpertRanking::kFrequency);
  ASSERT_EQ(int64_t(ranked.size()), int64_t(p.layers.size()) * p.num_experts);
  const auto count = [&](const ExpertRef& r) {
    for (const LayerProfile& lp : p.layers) {
      if (lp.layer == r.layer) return lp.tokens_routed[size_t(r.expert)];
    }
    return int64_t(-1);
  };
  for (size_t i = 1; i < ranked.size(); ++i) EXPECT_GE(count(ranked[i - 1]), count(ranked[i]));
}

TEST_F(ExpertProfileTest, MalformedProfilesAreRefusedWithACode) {
  const std::string good = R"({"format": "anymoe-expert-profile", "version": 1,
    "model": {"name": "m", "fingerprint": "0123456789abcdef"}, "source": "s",
    "num_experts": 2, "experts_per_token": 1, "tokens": 3,
    "layers": [{"layer": 1, "tokens_routed": [1, 2], "probability_mass": [1.5, 1.5],
                "saliency": [0.5, 0.25]}]})";
  auto ok = ExpertProfile::Parse(good, "good");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->layers[0].tokens_routed, (std::vector<int64_t>{1, 2}));
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  for (const std::string& bad :
       {std::string("[1, 2]"), std::string("{\"format\": 1}"),
        with("\"version\": 1", "\"version\": 2"), with("[1, 2]", "[1]"), with("[1, 2]", "[1, -2]"),
        with("[1, 2]", "[1.5, 2]"), with("[0.5, 0.25]", "[0.5, 1e999]"),
        with("\"num_experts\": 2", "\"num_experts\": 0"),
        with("\"experts_per_token\": 1", "\"experts_per_token\": 3"),
        with("\"layer\": 1", "\"layer\": -1"),
        with("\"fingerprint\": \"0123456789abcdef\"", "\"x\": 1"),
        good.substr(0, good.size() / 2)}) {
    auto r = ExpertProfile::Parse(bad, "bad");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), "profile_malformed") << r.status().message();
  }
  auto missing = ExpertProfile::Load(Path("absent.json"));
  EXPECT_EQ(missing.status().code(), "profile_unreadable");
}

}  // namespace
}  // namespace anymoe
