// Per-op fallback: ops forced onto the CPU (BackendOptions::disabled_ops, the
// same switch as $ANYMOE_DISABLE_OPS) give the same greedy tokens as the
// device's native kernels, and the doctor's record says where each op ran.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/fallback_backend.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

std::string Golden(const std::string& rel) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel; }

struct Outcome {
  std::vector<int32_t> greedy;
  std::vector<FallbackBackend::Usage> usage;
};

// Greedy 12 tokens after the golden prompt, on opencl with `disabled` ops.
Expected<Outcome> Generate(const std::string& model_dir, const std::string& disabled) {
  BackendOptions o{.num_threads = 2};
  o.disabled_ops = disabled;
  ASSIGN_OR_RETURN(auto backend, CreateBackend("opencl", o));
  ASSIGN_OR_RETURN(ModelFile file, OpenModelFile(Golden(model_dir)));
  std::ifstream in(Golden(model_dir) + "/golden.json");
  const auto prompt = nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
  ASSIGN_OR_RETURN(
      auto model,
      LoadModel(file, *backend, LoadOptions{.max_step_tokens = 64, .kv_cache_tokens = 128}));
  Generator gen(*model, nullptr);
  ASSIGN_OR_RETURN(auto seq, gen.NewSequence(int64_t(prompt.size()) + 12));
  GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling = SamplingParams::Greedy();
  ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(seq, prompt, opt, nullptr));
  auto* fb = dynamic_cast<FallbackBackend*>(backend.get());
  if (fb == nullptr) return Status::Error("opencl is not wrapped in FallbackBackend");
  return Outcome{r.tokens, fb->usage()};
}

constexpr const char* kAllOps =
    "Embedding,RmsNorm,Matmul,Rope,Attention,LatentAttention,HeadMatmul,CopyColumns,"
    "IndexerTopK,LayerNorm,Route,GroupedMatmul,ScatterRows,GatherRows,ScatterAddRows,Zero,"
    "SwiGlu,Add,Copy";

class Fallback : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto probe = CreateBackend("opencl", BackendOptions{.num_threads = 2});
    if (!probe.ok()) GTEST_SKIP() << "opencl unavailable: " << probe.status().message();
  }
};

TEST_P(Fallback, ForcedFallbackGivesTheNativeTokens) {
  auto native = Generate(GetParam(), "");
  ASSERT_TRUE(native.ok()) << native.status().message();
  for (const auto& u : native->usage) EXPECT_TRUE(u.native) << OpName(u.op);

  // The heavy ops on the CPU, the rest on the device: copies both ways every layer.
  const std::string some = "Matmul,GroupedMatmul,Attention,LatentAttention,Route,IndexerTopK";
  for (const std::string& disabled : {some, std::string(kAllOps)}) {
    auto mixed = Generate(GetParam(), disabled);
    ASSERT_TRUE(mixed.ok()) << mixed.status().message();
    EXPECT_EQ(mixed->greedy, native->greedy) << "disabled: " << disabled;
    int fell_back = 0;
    for (const auto& u : mixed->usage) {
      const bool listed = disabled.find(std::string(OpName(u.op))) != std::string::npos;
      EXPECT_EQ(u.native, !listed) << OpName(u.op);
      fell_back += !u.native;
    }
    EXPECT_GT(fell_back, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Fallback,
                         ::testing::Values("llama_tiny", "moe/glm4_moe", "moe/glm_moe_dsa",
                                           "moe/deepseek_v3"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum((unsigned char)c) ? c : '_';
                           return s;
                         });

TEST(FallbackOptions, UnknownOpNameIsAnError) {
  BackendOptions o;
  o.disabled_ops = "Matmul,NoSuchOp";
  auto backend = CreateBackend("opencl", o);
  if (backend.ok()) FAIL() << "accepted an unknown op";
  const std::string msg = backend.status().message();
  if (msg.find("unknown backend") != std::string::npos) GTEST_SKIP() << msg;
  if (msg.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << msg;
  EXPECT_NE(msg.find("NoSuchOp"), std::string::npos) << msg;
}

}  // namespace
}  // namespace anymoe
