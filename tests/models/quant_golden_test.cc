// Quantised checkpoints end to end against transformers run on the weights as
// an independent dequantiser gives them (tests/golden/fp8 from
// tools/gen_fp8_golden.py: the FP8 block formula; tests/golden/quant from
// tools/gen_quant_golden.py: the gguf package on llama-quantize's files): with
// --exact, the prompt logits within 1e-4 and the same greedy continuation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

using json = nlohmann::json;
constexpr float kTolerance = 1e-4f;

// A case: the model (folder or .gguf, relative to tests/golden) and the folder
// holding its golden.json + logits.npy.
struct Case {
  std::string model, golden;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class QuantGolden : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string root = std::string(ANYMOE_GOLDEN_DIR) + "/";
    golden_dir_ = root + GetParam().golden;
    std::ifstream in(golden_dir_ + "/golden.json");
    golden_ = json::parse(in);
    prompt_ = golden_["prompt_ids"].get<std::vector<int32_t>>();
    auto file = OpenModelFile(root + GetParam().model);
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    BackendOptions options{.num_threads = 2};
    options.exact_matmul = true;
    backend_ = std::move(CreateBackend("cpu", options)).value();
    auto model = LoadModel(file_, *backend_, LoadOptions{.max_step_tokens = 64});
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(model).value();
  }

  std::string golden_dir_;
  json golden_;
  std::vector<int32_t> prompt_;
  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(QuantGolden, PromptLogitsAndGreedyTokensMatch) {
  auto cache = model_->NewCache(128);
  ASSERT_TRUE(cache.ok());
  auto logits = model_->Forward(prompt_, **cache, true);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  std::vector<float> ours(size_t(logits->elements()));
  backend_->ReadF32(*logits, ours);
  const std::vector<float> want = ReadNpy(golden_dir_ + "/logits.npy")->F32().value();
  ASSERT_EQ(ours.size(), want.size());
  float diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(ours[i] - want[i]));
  EXPECT_LT(diff, kTolerance);
  std::printf("[ %s ] prompt logits max |diff| = %.3g\n", GetParam().model.c_str(), diff);

  Generator gen(*model_, nullptr);
  auto seq = gen.NewSequence(128);
  ASSERT_TRUE(seq.ok());
  GenerateOptions opt;
  opt.max_new_tokens = int(golden_["greedy_ids"].size());
  opt.sampling = SamplingParams::Greedy();
  auto result = gen.Generate(*seq, prompt_, opt, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->tokens, golden_["greedy_ids"].get<std::vector<int32_t>>());
}

std::string TestName(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.model;
  for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fp8Blocks, QuantGolden,
                         ::testing::Values(Case{"fp8/deepseek_v3", "fp8/deepseek_v3"},
                                           Case{"fp8/glm_moe_dsa", "fp8/glm_moe_dsa"}),
                         TestName);
// Every new GGUF type in one file (tensors of one type family each), made by
// llama.cpp's converter and llama-quantize from a 256-wide tiny GLM-5.
INSTANTIATE_TEST_SUITE_P(MixedGguf, QuantGolden,
                         ::testing::Values(Case{"quant/glm_moe_dsa_w256_mixed.gguf",
                                                "quant/glm_moe_dsa_w256_mixed"}),
                         TestName);

}  // namespace
}  // namespace anymoe
