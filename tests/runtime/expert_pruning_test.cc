// Expert pruning (runtime/expert_pruning.h, models/expert_subset.h,
// models/pruned_gguf.h) against transformers: the kept experts chosen from our
// profile of the golden prompt equal those tools/gen_prune_golden.py chose from
// transformers' profile, and the pruned model's prompt logits equal
// transformers' with the pruned experts' router scores at -inf (softmax,
// sigmoid + bias + group-limited, Mixtral; by saliency and by count; per-expert,
// stacked and fused gate_up tensors). The GGUF
// `anymoe prune` writes loads to bitwise the logits of pruning at load (f32
// and q8_0), streamed experts too; the pruned experts' bytes are not loaded;
// bad specs and subsets are refused with their codes.
#include "runtime/expert_pruning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "formats/gguf.h"
#include "models/config_loader.h"
#include "models/model.h"
#include "models/model_file.h"
#include "models/model_fingerprint.h"
#include "models/pruned_gguf.h"
#include "testing/loaded_model.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

const std::string kGolden = std::string(ANYMOE_GOLDEN_DIR) + "/";
// The MoE goldens' tolerance (tests/models/moe_golden_test.cc): f32 throughout.
constexpr float kTolerance = 3e-5f;

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<float> PromptLogits(Model& m, const std::vector<int32_t>& prompt) {
  auto cache = std::move(m.NewCache(64)).value();
  auto logits = m.Forward(prompt, *cache, true);
  EXPECT_TRUE(logits.ok()) << logits.status().message();
  if (!logits.ok()) return {};
  std::vector<float> out(size_t(logits->elements()));
  m.backend().ReadF32(*logits, out);
  return out;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

testing::LoadedModel Load(const std::string& path, const ExpertSubset* subset,
                          bool exact = false, bool stream = false) {
  BackendOptions backend{.num_threads = 2};
  backend.exact_matmul = exact;
  backend.copy_weights = stream;  // as the engine does when experts stream
  LoadOptions load{.max_step_tokens = 64};
  load.expert_subset = subset;
  if (stream) load.expert_cache = {.enabled = true, .slots = 6};
  return testing::LoadCpuModel(path, backend, load);
}

class ExpertPruningTest : public testing::TempDirTest {
 protected:
  // Our profile of `prompt` on the file at `path`, written to a temporary file.
  std::string ProfileOf(const std::string& path, const std::vector<int32_t>& prompt) {
    testing::LoadedModel l = Load(path, nullptr, /*exact=*/true);
    ExpertProfiler profiler(l.model->config(), path, ModelFingerprint(l.file), "test");
    l.model->SetObserver(&profiler.observer());
    PromptLogits(*l.model, prompt);
    l.model->SetObserver(nullptr);
    const std::string out = Path("profile.json");
    EXPECT_TRUE(profiler.Snapshot().Write(out).ok());
    return out;
  }
};

struct Case {
  const char* name;   // tests/golden/prune/NAME.json
  const char* model;  // tests/golden/moe/MODEL
};
constexpr Case kCases[] = {{"qwen3_moe_keep4_saliency", "qwen3_moe"},
                           {"glm4_moe_keep4_saliency", "glm4_moe"},
                           // The same weights in transformers v5's fused gate_up layout.
                           {"glm4_moe_keep4_saliency", "glm4_moe_fused"},
                           {"mixtral_keep4_saliency", "mixtral"},
                           {"mixtral_keep2_count", "mixtral"}};

TEST_F(ExpertPruningTest, MatchesTransformersWithPrunedExpertsMasked) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const nlohmann::json golden = ReadJson(kGolden + "prune/" + c.name + ".json");
    const auto prompt = golden["prompt_ids"].get<std::vector<int32_t>>();
    const std::string path = kGolden + "moe/" + c.model;
    ExpertPruneOptions options;
    options.spec = ProfileOf(path, prompt) + ":" + std::to_string(golden["keep"].get<int>());
    options.ranking = golden["ranking"] == "saliency" ? ExpertRanking::kSaliency
                                                      : ExpertRanking::kFrequency;
    const ModelFile file = std::move(OpenModelFile(path)).value();
    auto subset = PlanExpertPruning(file, options);
    ASSERT_TRUE(subset.ok()) << subset.status().message();
    for (const auto& [layer, kept] : golden["kept"].items()) {
      EXPECT_EQ(std::vector<int32_t>(subset->layer(std::stoll(layer)).begin(),
                                     subset->layer(std::stoll(layer)).end()),
                kept.get<std::vector<int32_t>>())
          << "layer " << layer;
    }

    testing::LoadedModel l = Load(path, &*subset);
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->config().moe.num_experts, golden["keep"].get<int64_t>());
    // The router chooses what transformers' masked router chose (in the file's ids).
    std::map<int64_t, std::vector<std::vector<int32_t>>> chosen;
    ForwardObserver observer;
    observer.on_route = [&](int64_t layer, std::span<const int32_t> ids, int64_t k) {
      for (size_t t = 0; t < ids.size() / size_t(k); ++t) {
        std::vector<int32_t> e;
        for (int64_t j = 0; j < k; ++j) e.push_back(subset->layer(layer)[size_t(ids[t * k + j])]);
        std::sort(e.begin(), e.end());
        chosen[layer].push_back(e);
      }
    };
    l.model->SetObserver(&observer);
    const std::vector<float> ours = PromptLogits(*l.model, prompt);
    l.model->SetObserver(nullptr);
    for (const auto& [layer, rows] : golden["chosen"].items()) {
      EXPECT_EQ(chosen[std::stoll(layer)], rows.get<std::vector<std::vector<int32_t>>>())
          << "layer " << layer;
    }
    const std::vector<float> want =
        ReadNpy(kGolden + "prune/" + c.name + "_logits.npy")->F32().value();
    const float diff = MaxAbsDiff(ours, want);
    EXPECT_LT(diff, kTolerance);
    // Not the unpruned model's logits: the masking mattered.
    EXPECT_GT(MaxAbsDiff(ours, ReadNpy(kGolden + "moe/" + c.model + "/logits.npy")->F32().value()),
              0.1f);
    std::printf("[ %s ] pruned prompt logits max |diff| vs transformers = %.3g\n", c.name, diff);
  }
}

// Bytes of the routed experts of `file` (stacked GGUF tensors) that a subset
// keeping `kept` of `total` per layer leaves out, router rows and biases included.
uint64_t PrunedBytes(const ModelFile& file, int64_t kept, int64_t total) {
  uint64_t bytes = 0;
  for (const TensorInfo& t : file.tensors().tensors()) {
    const bool per_expert = t.name.ends_with("_exps.weight") ||
                            t.name.ends_with("ffn_gate_inp.weight") ||
                            t.name.ends_with("exp_probs_b.bias");
    if (!per_expert) continue;
    const uint64_t per = t.bytes / uint64_t(total);
    // Backends hold 1-D weights as f32 (they are f32 in these files).
    bytes += per * uint64_t(total - kept);
  }
  return bytes;
}

TEST_F(ExpertPruningTest, PrunedGgufGivesBitwiseTheLogitsOfPruningAtLoad) {
  for (const char* name : {"glm4_moe", "mixtral", "glm4_moe.q8_0"}) {
    SCOPED_TRACE(name);
    const std::string in = kGolden + "moe_gguf/" + name + ".gguf";
    const std::string base = std::string(name).substr(0, std::string(name).find('.'));
    const nlohmann::json golden = ReadJson(kGolden + "prune/" + base + "_keep4_saliency.json");
    const auto prompt = golden["prompt_ids"].get<std::vector<int32_t>>();
    const ModelFile file = std::move(OpenModelFile(in)).value();
    const ExpertSubset subset =
        std::move(PlanExpertPruning(file, {ProfileOf(in, prompt) + ":50%"})).value();
    const std::string out = Path("pruned.gguf");
    ASSERT_TRUE(WritePrunedGguf(*file.gguf, std::move(LoadModelConfig(file)).value(), subset, out).ok());

    testing::LoadedModel at_load = Load(in, &subset);
    testing::LoadedModel written = Load(out, nullptr);
    testing::LoadedModel streamed = Load(in, &subset, false, /*stream=*/true);
    testing::LoadedModel full = Load(in, nullptr);
    ASSERT_TRUE(at_load.model && written.model && streamed.model && full.model);
    const std::vector<float> a = PromptLogits(*at_load.model, prompt);
    EXPECT_EQ(a, PromptLogits(*written.model, prompt));
    EXPECT_EQ(a, PromptLogits(*streamed.model, prompt));
    if (base == name) {  // f32: bit-identical to the HF weights, so transformers' golden applies
      const std::vector<float> want =
          ReadNpy(kGolden + "prune/" + base + "_keep4_saliency_logits.npy")->F32().value();
      EXPECT_LT(MaxAbsDiff(a, want), kTolerance);
    }
    // The pruned experts are never loaded: exactly their bytes are saved.
    EXPECT_EQ(full.model->weight_bytes() - at_load.model->weight_bytes(),
              PrunedBytes(file, 4, 8));
    EXPECT_EQ(at_load.model->weight_bytes(), written.model->weight_bytes());

    // The written file: 4 experts per layer in its metadata and tensors.
    const ModelFile pruned = std::move(OpenModelFile(out)).value();
    const std::string arch = *pruned.gguf->GetString("general.architecture");
    EXPECT_EQ(*pruned.gguf->GetU32(arch + ".expert_count"), 4u);
    for (const TensorInfo& t : pruned.tensors().tensors()) {
      if (t.name.ends_with("_exps.weight") || t.name.ends_with("ffn_gate_inp.weight")) {
        EXPECT_EQ(t.shape[0], 4) << t.name;
      }
    }
    EXPECT_EQ(pruned.tensors().tensors().size(), file.tensors().tensors().size());
  }
}

TEST_F(ExpertPruningTest, RefusesBadSpecsAndSubsets) {
  for (const char* bad : {"", "p.json", "p.json:", ":4", "p.json:x", "p.json:0", "p.json:1.5",
                          "p.json:0%", "p.json:101%", "p.json:-3", "p.json:nan%", "p.json:1e3"}) {
    auto s = ParsePruneSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), "prune_spec_invalid") << bad;
  }
  auto ok = ParsePruneSpec("dir:with:colons/p.json:25%");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->profile, "dir:with:colons/p.json");
  EXPECT_EQ(ok->percent, 25);
  EXPECT_FALSE(ParsePruneRanking("often").ok());

  const std::string path = kGolden + "moe/glm4_moe";  // 8 experts, top-2, 2 groups
  const ModelFile file = std::move(OpenModelFile(path)).value();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::string profile = ProfileOf(path, prompt);
  for (const char* keep : {"1", "3", "9", "10%"}) {  // below top-k, odd over 2 groups, too many
    auto s = PlanExpertPruning(file, {profile + ":" + keep});
    ASSERT_FALSE(s.ok()) << keep;
    EXPECT_EQ(s.status().code(), "prune_invalid") << keep << ": " << s.status().message();
  }
  auto s = PlanExpertPruning(file, {profile + ":50%"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  // Two of each group of four, whatever the profile's ranking.
  for (int64_t layer : {1, 2}) {
    const auto k = s->layer(layer);
    ASSERT_EQ(k.size(), 4u);
    EXPECT_EQ((k[0] < 4) + (k[1] < 4) + (k[2] < 4) + (k[3] < 4), 2);
  }
  // Another model's profile.
  const ModelFile other = std::move(OpenModelFile(kGolden + "moe/qwen3_moe")).value();
  auto mismatch = PlanExpertPruning(other, {profile + ":4"});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), "profile_model_mismatch");

  // A hand-made subset the loader must refuse: unsorted ids.
  ExpertSubset bad = *s;
  std::swap(bad.kept[1][0], bad.kept[1][1]);
  LoadOptions load;
  load.expert_subset = &bad;
  auto be = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 1})).value();
  auto model = LoadModel(file, *be, load);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), "prune_invalid");
}

}  // namespace
}  // namespace anymoe
