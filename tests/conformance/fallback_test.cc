// Per-op fallback: ops forced onto the CPU (BackendOptions::disabled_ops, the
// same switch as $ANYMOE_DISABLE_OPS) give the same greedy tokens as the
// device's native kernels, and the doctor's record says where each op ran.
// Hybrid placement (--cpu-moe, --n-cpu-moe N: the routed experts of the first
// N layers in host memory, run on the CPU): with every layer, the logits are
// bit for bit those of GroupedMatmul forced onto the fallback (the same CPU
// kernel on the same inputs) and the experts take no device memory; with some
// layers, the device's greedy tokens and logits within the conformance
// tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/fallback_backend.h"
#include "models/memory_plan.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

std::string Golden(const std::string& rel) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel; }

struct Outcome {
  std::vector<int32_t> greedy;
  std::vector<FallbackBackend::Usage> usage;
  std::vector<float> logits;  // the prompt's last position
  uint64_t reserved = 0;      // device bytes reserved at load
  MemoryPlan plan;            // as PlanMemory sized it
};

// The golden prompt's logits and greedy 12 tokens after it, on opencl with
// `disabled` ops and the routed experts of layers [0, cpu_moe_layers) on the CPU.
Expected<Outcome> Generate(const std::string& model_dir, const std::string& disabled,
                           int64_t cpu_moe_layers = 0) {
  BackendOptions o{.num_threads = 2};
  o.disabled_ops = disabled;
  ASSIGN_OR_RETURN(auto backend, CreateBackend("opencl", o));
  ASSIGN_OR_RETURN(ModelFile file, OpenModelFile(Golden(model_dir)));
  std::ifstream in(Golden(model_dir) + "/golden.json");
  const auto prompt = nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
  LoadOptions load{.max_step_tokens = 64, .kv_cache_tokens = 128};
  load.cpu_moe_layers = cpu_moe_layers;
  Outcome out;
  ASSIGN_OR_RETURN(out.plan, PlanMemory(file, load));
  ASSIGN_OR_RETURN(auto model, LoadModel(file, *backend, load));
  out.reserved = backend->device().reserved_bytes;
  {
    ASSIGN_OR_RETURN(auto cache, model->NewCache(int64_t(prompt.size())));
    ASSIGN_OR_RETURN(Tensor logits, model->Forward(prompt, *cache, false));
    std::vector<float> all(size_t(logits.elements()));
    backend->ReadF32(logits, all);
    out.logits.assign(all.end() - ptrdiff_t(model->config().vocab_size), all.end());
  }
  Generator gen(*model, nullptr);
  ASSIGN_OR_RETURN(auto seq, gen.NewSequence(int64_t(prompt.size()) + 12));
  GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling = SamplingParams::Greedy();
  ASSIGN_OR_RETURN(GenerateResult r, gen.Generate(seq, prompt, opt, nullptr));
  auto* fb = dynamic_cast<FallbackBackend*>(backend.get());
  if (fb == nullptr) return Status::Error("opencl is not wrapped in FallbackBackend");
  out.greedy = r.tokens;
  out.usage = fb->usage();
  return out;
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

constexpr int64_t kAllLayers = std::numeric_limits<int64_t>::max();
constexpr float kLogitTolerance = 1e-4f;  // conformance_test.cc's, relative to the largest logit

// GroupedMatmul calls: on the device, and on the CPU with CPU weights.
std::pair<uint64_t, uint64_t> GroupedCalls(const Outcome& r) {
  uint64_t device = 0, cpu = 0;
  for (const auto& u : r.usage) {
    if (u.op != Op::kGroupedMatmul) continue;
    (u.cpu_weights ? cpu : device) += u.calls;
    if (!u.cpu_weights) {
      EXPECT_TRUE(u.native);
    }
  }
  return {device, cpu};
}

class CpuMoe : public Fallback {};

TEST_P(CpuMoe, EveryLayerOnTheCpuIsTheGroupedMatmulFallbackBitForBit) {
  auto hybrid = Generate(GetParam(), "", kAllLayers);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().message();
  auto fallback = Generate(GetParam(), "GroupedMatmul");
  ASSERT_TRUE(fallback.ok()) << fallback.status().message();
  ASSERT_EQ(hybrid->logits.size(), fallback->logits.size());
  EXPECT_EQ(0, std::memcmp(hybrid->logits.data(), fallback->logits.data(),
                           hybrid->logits.size() * sizeof(float)));
  EXPECT_EQ(hybrid->greedy, fallback->greedy);

  const auto [device_calls, cpu_calls] = GroupedCalls(*hybrid);
  EXPECT_EQ(device_calls, 0u);
  EXPECT_GT(cpu_calls, 0u);
  // The experts are host memory: planned apart, not reserved on the device.
  EXPECT_GT(hybrid->plan.cpu_weights, 0u);
  EXPECT_EQ(hybrid->plan.weights + hybrid->plan.cpu_weights, fallback->plan.weights);
  EXPECT_LE(hybrid->reserved + hybrid->plan.cpu_weights, fallback->reserved);
}

TEST_P(CpuMoe, SomeLayersOnTheCpuGiveTheDeviceTokens) {
  auto device = Generate(GetParam(), "");
  ASSERT_TRUE(device.ok()) << device.status().message();
  auto hybrid = Generate(GetParam(), "", 2);  // layer 0 is dense: the first MoE layer
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().message();
  EXPECT_EQ(hybrid->greedy, device->greedy);
  float max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < device->logits.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(device->logits[i]));
    max_diff = std::max(max_diff, std::fabs(device->logits[i] - hybrid->logits[i]));
  }
  EXPECT_LE(max_diff, kLogitTolerance * max_abs);

  const auto [device_calls, cpu_calls] = GroupedCalls(*hybrid);
  EXPECT_GT(device_calls, 0u);  // the later MoE layers
  EXPECT_GT(cpu_calls, 0u);     // the first
  EXPECT_GT(hybrid->plan.cpu_weights, 0u);
  EXPECT_LT(hybrid->plan.weights, device->plan.weights);
}

// Layer 0 dense, then at least two MoE layers.
INSTANTIATE_TEST_SUITE_P(Models, CpuMoe,
                         ::testing::Values("moe/glm4_moe", "moe/qwen3_moe", "moe/glm_moe_dsa"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum((unsigned char)c) ? c : '_';
                           return s;
                         });

// Greedy 12 tokens of a golden MoE model on the cpu backend, and the wrapper
// (null when the backend is not wrapped).
struct CpuRun {
  std::vector<int32_t> greedy;
  std::vector<FallbackBackend::OpTime> times;
  std::vector<FallbackBackend::OpTime> times_after_reset;
};

CpuRun GenerateOnCpu(const BackendOptions& o) {
  const std::string dir = "moe/glm4_moe";  // MultiMatmul, MultiAttention, MultiGroupedMatmul
  auto backend = CreateBackend("cpu", o);
  EXPECT_TRUE(backend.ok());
  auto file = OpenModelFile(Golden(dir));
  EXPECT_TRUE(file.ok());
  std::ifstream in(Golden(dir) + "/golden.json");
  const auto prompt = nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
  auto model = LoadModel(*file, **backend, LoadOptions{.max_step_tokens = 64});
  EXPECT_TRUE(model.ok()) << model.status().message();
  Generator gen(**model, nullptr);
  auto seq = gen.NewSequence(int64_t(prompt.size()) + 12);
  EXPECT_TRUE(seq.ok());
  GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling = SamplingParams::Greedy();
  auto r = gen.Generate(*seq, prompt, opt, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().message();
  CpuRun run{r->tokens, {}, {}};
  if (auto* fb = dynamic_cast<FallbackBackend*>(backend->get())) {
    run.times = fb->times();
    fb->ResetTimes();
    run.times_after_reset = fb->times();
  }
  return run;
}

// `anymoe bench --op-profile` times ops through the wrapper: it must run the
// same arithmetic (the fused calls reach the CPU's fused kernels) and time
// every op the model calls.
TEST(FallbackTimes, TimingTheCpuGivesItsTokensAndTimesEveryOp) {
  const CpuRun bare = GenerateOnCpu(BackendOptions{.num_threads = 2});
  const CpuRun timed = GenerateOnCpu(BackendOptions{.num_threads = 2, .time_ops = true});
  const CpuRun recorded = GenerateOnCpu(BackendOptions{.num_threads = 2, .record_ops = true});
  EXPECT_EQ(timed.greedy, bare.greedy);
  EXPECT_EQ(recorded.greedy, bare.greedy);
  EXPECT_TRUE(recorded.times.empty());  // recording alone times nothing
  std::map<Op, uint64_t> calls;
  for (const auto& t : timed.times) {
    EXPECT_GT(t.calls, 0u) << OpName(t.op);
    EXPECT_GT(t.seconds, 0.0) << OpName(t.op);
    calls[t.op] += t.calls;
  }
  // 12 steps (the prompt, then each generated token but the last fed back),
  // each with attention in every layer and the fused expert matmuls.
  for (Op op : {Op::kEmbedding, Op::kMatmul, Op::kAttention, Op::kGroupedMatmul, Op::kRoute})
    EXPECT_GT(calls[op], 0u) << OpName(op);
  EXPECT_EQ(calls[Op::kEmbedding], 12u);
  EXPECT_TRUE(timed.times_after_reset.empty());
}

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
