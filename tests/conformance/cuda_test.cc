// The CUDA backend where this build has it. Without a GPU (CI): creating it is
// a clear error, never a crash, and its Supports table is answerable without a
// device (what `anymoe doctor --backend cuda` prints). With a GPU
// (scripts/gpu-check.sh): no device allocation while decoding, prefill on the
// cuBLAS path and decode on the matvec path agree with the CPU, and ops forced
// onto the CPU fallback give the native tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/fallback_backend.h"
#include "core/half.h"
#include "formats/tensor_source.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

std::string Golden(const std::string& rel) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel; }

BackendOptions Options(uint64_t mem_budget = 0, bool exact = false) {
  BackendOptions o;
  o.num_threads = 2;
  o.mem_budget = mem_budget;
  o.exact_matmul = exact;
  return o;
}

#ifdef ANYMOE_HAVE_CUDA

TEST(Cuda, RegisteredInThisBuild) {
  const auto names = AvailableBackends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
}

TEST(Cuda, NoDeviceIsAClearError) {
  auto backend = CreateBackend("cuda", Options());
  if (backend.ok()) GTEST_SKIP() << "a CUDA device is present: " << (*backend)->device().name;
  const std::string msg = backend.status().message();
  EXPECT_EQ(msg.rfind("cuda: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
}

TEST(Cuda, SupportsTableWithoutADevice) {
  SupportsFn supports = DeviceSupportsTable("cuda");
  ASSERT_NE(supports, nullptr);
  for (DType d :
       {DType::kF32,     DType::kF16,   DType::kBF16,  DType::kQ8_0,    DType::kQ4_0,
        DType::kQ4_1,    DType::kQ5_0,  DType::kQ5_1,  DType::kIQ4_NL,  DType::kQ2_K,
        DType::kQ3_K,    DType::kQ4_K,  DType::kQ5_K,  DType::kQ6_K,    DType::kIQ2_XXS,
        DType::kIQ4_XS,  DType::kIQ1_S, DType::kIQ1_M, DType::kIQ2_XS,  DType::kIQ2_S,
        DType::kIQ3_XXS, DType::kIQ3_S, DType::kMXFP4, DType::kF8_E4M3, DType::kF8_E5M2}) {
    EXPECT_TRUE(supports(Op::kMatmul, d)) << Name(d);
    EXPECT_TRUE(supports(Op::kGroupedMatmul, d)) << Name(d);
    EXPECT_TRUE(supports(Op::kEmbedding, d)) << Name(d);
  }
  for (int op = 0; op < kNumOps; ++op) {
    EXPECT_TRUE(supports(Op(op), DType::kF32)) << OpName(Op(op));
  }
  EXPECT_EQ(DeviceSupportsTable("cpu"), nullptr);
}

#endif  // ANYMOE_HAVE_CUDA

// Everything below needs a CUDA device; it skips (and says so) without one.
std::unique_ptr<Backend> CudaOrSkipReason(std::string& why, BackendOptions o = Options()) {
  auto backend = CreateBackend("cuda", o);
  if (!backend.ok()) {
    why = backend.status().message();
    return nullptr;
  }
  return std::move(backend).value();
}

TEST(CudaDevice, NoDeviceAllocationWhileDecoding) {
  std::string why;
  auto backend = CudaOrSkipReason(why);
  if (!backend) GTEST_SKIP() << "cuda unavailable: " << why;
  auto file = OpenModelFile(Golden("moe/glm_moe_dsa"));
  ASSERT_TRUE(file.ok());
  auto model = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16, .kv_cache_tokens = 64});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const uint64_t at_load = backend->device().allocations;
  EXPECT_GE(at_load, 1u);
  Generator gen(**model, nullptr);
  GenerateOptions opt;
  opt.max_new_tokens = 24;
  opt.sampling = SamplingParams::Greedy();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (int i = 0; i < 2; ++i) {
    auto seq = gen.NewSequence(64);
    ASSERT_TRUE(seq.ok()) << seq.status().message();
    auto result = gen.Generate(*seq, prompt, opt, nullptr);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->tokens.size(), 24u);
  }
  EXPECT_EQ(backend->device().allocations, at_load);
}

TEST(CudaDevice, BudgetBelowThePlanFailsAtLoad) {
  std::string why;
  auto backend = CudaOrSkipReason(why, Options(100000));
  if (!backend) GTEST_SKIP() << "cuda unavailable: " << why;
  auto file = OpenModelFile(Golden("moe/glm_moe_dsa"));
  ASSERT_TRUE(file.ok());
  auto model = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("--mem-budget allows 100000 bytes"), std::string::npos)
      << model.status().message();
}

// Random weights of a dtype the CUDA backend runs natively: plain values, or
// random quants with small valid f16 scales (and q4_1 minimums).
std::vector<uint8_t> RandomWeights(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  const uint64_t bytes = uint64_t(rows) * BytesFor(dtype, uint64_t(cols)).value();
  std::vector<uint8_t> out(bytes);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), scale(0.005f, 0.05f);
  if (!Info(dtype).quantized) {
    const int width = dtype == DType::kF32 ? 4 : 2;
    for (uint64_t i = 0; i < bytes / uint64_t(width); ++i) {
      const float v = val(rng);
      const uint16_t h = dtype == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
      std::memcpy(out.data() + width * i, width == 4 ? static_cast<const void*>(&v) : &h, width);
    }
    return out;
  }
  for (auto& b : out) b = uint8_t(rng());
  const int block = Info(dtype).block_bytes;
  for (uint64_t at = 0; at < bytes; at += uint64_t(block)) {
    for (int field = 0; field < (dtype == DType::kQ4_1 ? 2 : 1); ++field) {
      const uint16_t h = F32ToF16(scale(rng));
      std::memcpy(out.data() + at + 2 * field, &h, 2);
    }
  }
  return out;
}

// y = x . W^T on cuda and on the CPU (exact), max |diff| / max |cpu|.
float MatmulRelDiff(Backend& dev, Backend& cpu, DType dtype, int64_t t, int64_t k, int64_t n,
                    std::mt19937& rng) {
  const std::vector<uint8_t> w_bytes = RandomWeights(dtype, n, k, rng);
  const TensorInfo info{"w", dtype, {n, k}, w_bytes.data(), w_bytes.size()};
  std::vector<float> x(size_t(t * k)), want(size_t(t * n)), got(want.size());
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (float& v : x) v = val(rng);
  std::vector<std::unique_ptr<Buffer>> keep;
  for (Backend* b : {&cpu, &dev}) {
    const Tensor w = b->PrepareWeight(info).value();
    keep.push_back(b->Allocate(x.size() * 4, "x").value());
    const Tensor xt = Tensor::Of(keep.back()->base(), DType::kF32, {t, k});
    keep.push_back(b->Allocate(want.size() * 4, "y").value());
    const Tensor yt = Tensor::Of(keep.back()->base(), DType::kF32, {t, n});
    b->WriteF32(x, xt);
    b->Matmul(xt, w, nullptr, yt);
    b->ReadF32(yt, b == &cpu ? want : got);
  }
  float diff = 0, scale = 1e-30f;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(want[i] - got[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / scale;
}

// Decode steps (<= 8 rows) run the matvec kernel, longer ones cuBLAS on
// decoded tiles; both against the CPU for every native dtype.
TEST(CudaDevice, MatvecAndGemmPathsMatchTheCpu) {
  std::string why;
  auto dev = CudaOrSkipReason(why);
  if (!dev) GTEST_SKIP() << "cuda unavailable: " << why;
  MemoryPlan plan;
  plan.weights = plan.activations = 64 << 20;
  plan.kv_tokens = 64;
  plan.max_step_tokens = 64;
  plan.buffers = 256;
  ASSERT_TRUE(dev->ReserveMemory(plan).ok());
  auto cpu = CreateBackend("cpu", Options(0, true));
  std::mt19937 rng(7);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                      DType::kQ4_1}) {
    for (int64_t t : {1, 8, 9, 64}) {
      const float d = MatmulRelDiff(*dev, **cpu, dtype, t, 1024, 96, rng);
      EXPECT_LT(d, 1e-5f) << Name(dtype) << " T=" << t;
      std::printf("[ cuda Matmul %-5s T=%lld ] max rel diff %.3g\n",
                  std::string(Name(dtype)).c_str(), static_cast<long long>(t), d);
    }
  }
}

// Greedy tokens after the golden prompt on cuda with `disabled` ops on the CPU.
Expected<std::vector<int32_t>> Greedy(const std::string& model_dir, const std::string& disabled) {
  BackendOptions o = Options();
  o.disabled_ops = disabled;
  ASSIGN_OR_RETURN(auto backend, CreateBackend("cuda", o));
  ASSIGN_OR_RETURN(ModelFile file, OpenModelFile(Golden(model_dir)));
  std::ifstream in(Golden(model_dir) + "/golden.json");
  const auto prompt = nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
  ASSIGN_OR_RETURN(auto model, LoadModel(file, *backend, LoadOptions{.max_step_tokens = 64,
                                                                      .kv_cache_tokens = 128}));
  Generator gen(*model, nullptr);
  ASSIGN_OR_RETURN(auto seq, gen.NewSequence(int64_t(prompt.size()) + 12));
  GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling = SamplingParams::Greedy();
  ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(seq, prompt, opt, nullptr));
  return r.tokens;
}

class CudaFallback : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaFallback, ForcedFallbackGivesTheNativeTokens) {
  std::string why;
  if (!CudaOrSkipReason(why)) GTEST_SKIP() << "cuda unavailable: " << why;
  auto native = Greedy(GetParam(), "");
  ASSERT_TRUE(native.ok()) << native.status().message();
  for (const char* disabled : {"Matmul,GroupedMatmul", "Attention,LatentAttention,IndexerTopK",
                               "Route,ScatterAddRows,GatherRows,RmsNorm,Rope"}) {
    auto forced = Greedy(GetParam(), disabled);
    ASSERT_TRUE(forced.ok()) << forced.status().message();
    EXPECT_EQ(*forced, *native) << "disabled: " << disabled;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaFallback,
                         ::testing::Values("llama_tiny", "moe/glm_moe_dsa", "moe/deepseek_v3",
                                           "moe/qwen3_moe"));

}  // namespace
}  // namespace anymoe
