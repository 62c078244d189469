// Cross-backend conformance: every golden model (dense llama, the MoE
// architectures from HF safetensors and from llama.cpp's GGUF conversion) on
// every device backend this build has (FP8 block-scaled checkpoints too),
// against the CPU backend in exact mode
// (f32 activations): prompt logits within kLogitTolerance at every position and
// the identical greedy continuation. A backend that is not built or has no
// device is skipped with a message. The MLA models run in the expanded form
// too (--mla-form). See docs/backends.md for the tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

// f32 everywhere; kernels sum in a different order than the CPU's BLAS and
// SIMD dot products, so logits move by rounding only (observed <= 1e-5).
constexpr float kLogitTolerance = 1e-4f;
constexpr int64_t kGreedyTokens = 16;

// Device backends the suite runs; "cuda" is skipped until that backend exists.
const std::vector<std::string> kDeviceBackends = {"opencl", "cuda"};

// The golden models: directory or GGUF under tests/golden, and where its golden.json is.
struct GoldenModel {
  std::string path;    // relative to tests/golden
  std::string golden;  // directory with golden.json (prompt_ids)
  MlaForm mla_form = MlaForm::kAbsorbed;
  std::string name() const {
    return mla_form == MlaForm::kAbsorbed ? path : path + " " + std::string(MlaFormName(mla_form));
  }
};

// gtest prints parameters in failure messages and test listings.
void PrintTo(const GoldenModel& m, std::ostream* os) { *os << m.name(); }

std::vector<GoldenModel> GoldenModels() {
  std::vector<GoldenModel> m = {{"llama_tiny", "llama_tiny"},
                                {"llama_tiny_tied", "llama_tiny_tied"}};
  for (const char* name : {"deepseek_v3", "glm4_moe", "glm4_moe_air", "glm4_moe_bf16",
                           "glm4_moe_fused", "glm4_moe_lite", "glm_moe_dsa", "glm_moe_dsa_dense",
                           "glm_moe_dsa_dv20", "mixtral", "qwen3_moe"}) {
    m.push_back({std::string("moe/") + name, std::string("moe/") + name});
  }
  for (const char* name : {"deepseek_v3", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "mixtral"}) {
    m.push_back({std::string("moe_gguf/") + name + ".gguf", std::string("moe/") + name});
  }
  // FP8 block-quantised checkpoints: the device kernels apply the block scales.
  for (const char* name : {"deepseek_v3", "glm_moe_dsa"}) {
    m.push_back({std::string("fp8/") + name, std::string("fp8/") + name});
  }
  m.push_back({"moe/deepseek_v3", "moe/deepseek_v3", MlaForm::kExpanded});
  m.push_back({"moe_gguf/glm4_moe_lite.gguf", "moe/glm4_moe_lite", MlaForm::kExpanded});
  m.push_back({"moe/glm_moe_dsa", "moe/glm_moe_dsa", MlaForm::kAuto});
  return m;
}

std::string Dir(const std::string& rel) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel; }

std::vector<int32_t> PromptIds(const GoldenModel& g) {
  std::ifstream in(Dir(g.golden) + "/golden.json");
  return nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
}

// What one backend makes of a model: logits of every prompt position and the
// greedy continuation.
struct Run {
  std::vector<float> prompt_logits;
  std::vector<int32_t> greedy;
};

Expected<Run> RunModel(const ModelFile& file, Backend& backend, std::span<const int32_t> prompt,
                       MlaForm mla_form) {
  LoadOptions load;
  load.mla_form = mla_form;
  load.max_step_tokens = 64;
  load.kv_cache_tokens = 256;
  ASSIGN_OR_RETURN(auto model, LoadModel(file, backend, load));
  Run run;
  {
    ASSIGN_OR_RETURN(auto cache, model->NewCache(int64_t(prompt.size())));
    ASSIGN_OR_RETURN(Tensor logits, model->Forward(prompt, *cache, /*all_logits=*/true));
    run.prompt_logits.resize(size_t(logits.elements()));
    backend.ReadF32(logits, run.prompt_logits);
  }
  Generator gen(*model, nullptr);
  ASSIGN_OR_RETURN(auto seq, gen.NewSequence(int64_t(prompt.size()) + kGreedyTokens));
  GenerateOptions opt;
  opt.max_new_tokens = kGreedyTokens;
  opt.sampling = SamplingParams::Greedy();
  ASSIGN_OR_RETURN(GenerateResult result, gen.Generate(seq, prompt, opt, nullptr));
  run.greedy = result.tokens;
  return run;
}

float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// A device backend, or a skip reason.
Expected<std::unique_ptr<Backend>> Device(const std::string& name, const BackendOptions& o) {
  auto backend = CreateBackend(name, o);
  if (!backend.ok()) return backend.status();
  return std::move(backend).value();
}

using Param = std::tuple<std::string, GoldenModel>;

class Conformance : public ::testing::TestWithParam<Param> {};

TEST_P(Conformance, MatchesCpuBackend) {
  const auto& [backend_name, model] = GetParam();
  auto device = Device(backend_name, BackendOptions{.num_threads = 2});
  if (!device.ok()) GTEST_SKIP() << backend_name << " unavailable: " << device.status().message();
  auto file = OpenModelFile(Dir(model.path));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::vector<int32_t> prompt = PromptIds(model);

  auto cpu = CreateBackend("cpu", BackendOptions{.num_threads = 2, .exact_matmul = true});
  ASSERT_TRUE(cpu.ok());
  auto want = RunModel(*file, **cpu, prompt, model.mla_form);
  ASSERT_TRUE(want.ok()) << want.status().message();
  auto got = RunModel(*file, **device, prompt, model.mla_form);
  ASSERT_TRUE(got.ok()) << got.status().message();

  const float diff = MaxAbsDiff(got->prompt_logits, want->prompt_logits);
  EXPECT_LT(diff, kLogitTolerance);
  EXPECT_EQ(got->greedy, want->greedy);
  std::printf("[ %s %s ] prompt logits max |diff| vs cpu = %.3g over %zu positions, greedy %s\n",
              backend_name.c_str(), model.name().c_str(), diff, prompt.size(),
              got->greedy == want->greedy ? "identical" : "DIFFERENT");
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param).name();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllModels, Conformance,
                         ::testing::Combine(::testing::ValuesIn(kDeviceBackends),
                                            ::testing::ValuesIn(GoldenModels())),
                         ParamName);

}  // namespace
}  // namespace anymoe
