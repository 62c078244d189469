// GLM-5.3-Flash (glm5_next) against transformers 5.24 (tests/golden/moe/glm5_next,
// from tools/gen_glm5_next_golden.py): a Glm5NextForConditionalGeneration folder
// whose text model has KDA and NoPE-MLA (KPool DSA, one shared indexer) layers,
// mHC streams and clamped SwiGLU. The 150-token prompt's logits fed in steps of
// 64 (the chunked KDA form over 3 chunks), in cached chunks of 50/64/36, and as
// a 16-token prefill then one token at a time (the recurrent form); the 24-token
// greedy continuation and its logits; the experts each router chose; the keys
// each KPool indexer kept. Every case runs on every CPU kernel target, from the
// HF folder and from its GGUF conversions (tools/gen_glm5_next_gguf.py): the
// f32 file, whose weights are the safetensors' bit for bit, against the same
// bounds; the q8_0 file against the f32 file's greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/npy.h"
#include "formats/gguf.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"
#include "testing/cpu_targets.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

// The bound for --exact (f32 throughout); the observed differences are printed.
constexpr float kTolerance = 1e-4f;

const std::string kDir = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm5_next";

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<float> ReadF32(const std::string& name) {
  return ReadNpy(kDir + "/" + name)->F32().value();
}

float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One CPU target and one form of the checkpoint.
struct Case {
  std::string target;
  std::string model;  // under ANYMOE_GOLDEN_DIR
  bool gguf() const { return model.ends_with(".gguf"); }
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " on " << c.target; }

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string& target : testing::CpuTargetNames()) {
    cases.push_back({target, "moe/glm5_next"});
    cases.push_back({target, "moe_gguf/glm5_next.gguf"});
  }
  return cases;
}

class Glm5NextGolden : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    target_.emplace(GetParam().target);
    golden_ = ReadJson(kDir + "/golden.json");
    prompt_ = golden_["prompt_ids"].get<std::vector<int32_t>>();
    auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + GetParam().model);
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    auto model = LoadModel(file_, *backend_, LoadOptions{.max_step_tokens = 64});
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(model).value();
  }

  // The prompt in steps of `sizes` tokens (the last size repeated); every position's logits.
  std::vector<float> RunPrompt(std::vector<size_t> sizes) {
    auto cache = model_->NewCache(256);
    EXPECT_TRUE(cache.ok());
    std::vector<float> all;
    size_t step = 0;
    for (size_t i = 0; i < prompt_.size(); ++step) {
      const size_t n = std::min(sizes[std::min(step, sizes.size() - 1)], prompt_.size() - i);
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

  void Expect(const std::vector<float>& ours, const char* file) {
    const float diff = MaxAbsDiff(ours, ReadF32(file));
    EXPECT_LT(diff, kTolerance) << file;
    std::printf("[ %s on %s ] %s max |diff| = %.3g\n", GetParam().model.c_str(),
                GetParam().target.c_str(), file, diff);
  }

  std::optional<testing::ScopedCpuTarget> target_;  // outlives the model
  json golden_;
  std::vector<int32_t> prompt_;
  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(Glm5NextGolden, ReadsTheTextConfigAndIgnoresTheVisionTower) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, "glm5_next");
  EXPECT_EQ(c.hc.mult, 4);
  EXPECT_EQ(c.kpool.pool, 4);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 10.0f);
  EXPECT_TRUE(c.is_linear(0) && !c.is_linear(1) && !c.is_linear(2) && c.is_linear(3));
  EXPECT_EQ(c.indexer_kinds[2], IndexerKind::kShared);
  if (!GetParam().gguf()) {
    EXPECT_NE(file_.note.find("25 tensors"), std::string::npos) << file_.note;
  } else {
    EXPECT_EQ(file_.gguf->GetString("general.architecture").value(), "glm5-next");
  }
}

TEST_P(Glm5NextGolden, PromptLogitsMatch) { Expect(RunPrompt({64}), "logits.npy"); }

TEST_P(Glm5NextGolden, ChunkedPrefillCarriesTheState) {
  Expect(RunPrompt({50, 64, 36}), "chunked_logits.npy");
}

TEST_P(Glm5NextGolden, PrefillThenRecurrentDecodeMatches) {
  Expect(RunPrompt({16, 1}), "prefill16_logits.npy");
}

TEST_P(Glm5NextGolden, GreedyContinuationMatches) {
  Generator gen(*model_, nullptr);
  auto seq = gen.NewSequence(256);
  ASSERT_TRUE(seq.ok());
  GenerateOptions opt;
  const auto want = golden_["greedy_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(want.size(), 24u);
  opt.max_new_tokens = int(want.size());
  opt.sampling = SamplingParams::Greedy();
  opt.record_logits = true;
  auto result = gen.Generate(*seq, prompt_, opt, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->tokens, want);
  Expect(result->logits, "decode_logits.npy");
}

TEST_P(Glm5NextGolden, RoutersAndIndexersChooseTheReferenceExpertsAndKeys) {
  std::map<int64_t, std::vector<std::vector<int32_t>>> experts, keys;
  ForwardObserver observer;
  observer.on_route = [&](int64_t layer, std::span<const int32_t> ids, int64_t k) {
    for (size_t t = 0; t < ids.size() / size_t(k); ++t) {
      std::vector<int32_t> e(ids.begin() + t * k, ids.begin() + (t + 1) * k);
      std::sort(e.begin(), e.end());
      experts[layer].push_back(e);
    }
  };
  observer.on_key_selection = [&](int64_t layer, const KeySelection& s) {
    // The view spans the selection buffer (max_step_tokens rows): keep the step's.
    for (size_t t = 0; t < s.counts.size() && keys[layer].size() < prompt_.size(); ++t) {
      const int32_t* row = s.keys.data() + t * size_t(s.stride);
      keys[layer].emplace_back(row, row + s.counts[t]);
    }
  };
  model_->SetObserver(&observer);
  RunPrompt({64});
  model_->SetObserver(nullptr);
  const json routers = ReadJson(kDir + "/router.json");
  ASSERT_EQ(experts.size(), routers.size());
  for (const auto& [layer, ids] : routers.items()) {
    EXPECT_EQ(experts[std::stoll(layer)], ids.get<std::vector<std::vector<int32_t>>>())
        << "layer " << layer;
  }
  const json selections = ReadJson(kDir + "/dsa_topk.json");
  ASSERT_EQ(selections.size(), 2u);  // the full indexer layers 1 and 4
  for (const auto& [layer, rows] : selections.items()) {
    const auto want = rows.get<std::vector<std::vector<int32_t>>>();
    const auto& got = keys[std::stoll(layer)];
    ASSERT_EQ(got.size(), want.size()) << "layer " << layer;
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_EQ(got[t], want[t]) << "layer " << layer << ", query " << t;
    }
  }
  // The shared layer 2 attends layer 1's selection.
  EXPECT_EQ(keys[2], keys[1]);
}

TEST_P(Glm5NextGolden, TruncatingTheCacheIsRefusedNotSilentlyWrong) {
  auto cache = model_->NewCache(256);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(model_->Forward(std::span(prompt_).first(20), **cache, false).ok());
  (*cache)->set_length(10);  // what a speculative rollback does to an attention cache
  auto step = model_->Forward(std::span(prompt_).subspan(10, 1), **cache, false);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("recurrent (KDA) state covers 20 tokens"),
            std::string::npos)
      << step.status().message();
}

// The prompt's logits (one 64-token step at a time) of `model` on the current target.
std::vector<float> PromptLogits(const std::string& model, std::span<const int32_t> prompt) {
  auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + model);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return {};
  auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
  auto m = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 64});
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  auto cache = (*m)->NewCache(256);
  std::vector<float> all;
  for (size_t i = 0; i < prompt.size(); i += 64) {
    auto logits =
        (*m)->Forward(prompt.subspan(i, std::min<size_t>(64, prompt.size() - i)), **cache, true);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return all;
    std::vector<float> rows(size_t(logits->elements()));
    backend->ReadF32(*logits, rows);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

// The f32 GGUF holds the safetensors' values, so on each target it must give
// the folder's logits bit for bit (the name, layout and metadata mapping is
// all that differs). The q8_0 file (its matrices really Q8_0) loads and runs
// the quantised kernels on the KDA, MLA, indexer and expert matrices; its
// numbers have no reference yet: this tiny model (weights scaled up so the
// SwiGLU clamp binds) amplifies quantisation, a Q8_0 embedding alone moves the
// logits by up to 4.2, so its difference to transformers is printed, not bounded.
TEST(Glm5NextGguf, F32FileIsTheFolderBitForBitAndQ8_0Runs) {
  {
    auto q8 = GgufFile::Open(std::string(ANYMOE_GOLDEN_DIR) + "/moe_gguf/glm5_next.q8_0.gguf");
    ASSERT_TRUE(q8.ok()) << q8.status().message();
    const TensorInfo* experts = (*q8)->Find("blk.1.ffn_gate_exps.weight");
    const TensorInfo* kda = (*q8)->Find("blk.0.attn_q.weight");
    ASSERT_TRUE(experts != nullptr && kda != nullptr);
    EXPECT_EQ(experts->dtype, DType::kQ8_0);
    EXPECT_EQ(kda->dtype, DType::kQ8_0);
  }
  const auto prompt = ReadJson(kDir + "/golden.json")["prompt_ids"].get<std::vector<int32_t>>();
  const std::vector<float> want = ReadF32("logits.npy");
  for (const std::string& target : testing::CpuTargetNames()) {
    SCOPED_TRACE(target);
    testing::ScopedCpuTarget scoped(target);
    const std::vector<float> hf = PromptLogits("moe/glm5_next", prompt);
    const std::vector<float> gguf = PromptLogits("moe_gguf/glm5_next.gguf", prompt);
    ASSERT_EQ(hf.size(), want.size());
    EXPECT_TRUE(hf == gguf) << "max |diff| " << MaxAbsDiff(hf, gguf);
    const std::vector<float> q8 = PromptLogits("moe_gguf/glm5_next.q8_0.gguf", prompt);
    ASSERT_EQ(q8.size(), want.size());
    EXPECT_TRUE(std::all_of(q8.begin(), q8.end(), [](float x) { return std::isfinite(x); }));
    std::printf("[ %s ] q8_0 vs transformers (not bounded): max |diff| = %.3g\n", target.c_str(),
                MaxAbsDiff(q8, want));
  }
}

INSTANTIATE_TEST_SUITE_P(CpuTargets, Glm5NextGolden, ::testing::ValuesIn(Cases()),
                         [](const auto& info) {
                           return testing::TestNameOf(info.param.target) +
                                  (info.param.gguf() ? "_gguf" : "");
                         });

}  // namespace
}  // namespace anymoe
