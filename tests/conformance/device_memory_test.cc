// Device memory discipline: everything a device backend needs is reserved at
// load from the plan; decoding makes no device allocation; a budget below the
// plan fails at load naming needed vs available bytes.
#include <gtest/gtest.h>

#include "models/memory_plan.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

const std::string kModel = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa";

std::unique_ptr<Backend> OpenClOrSkip(BackendOptions o = BackendOptions{.num_threads = 2}) {
  auto backend = CreateBackend("opencl", o);
  if (!backend.ok()) return nullptr;
  return std::move(backend).value();
}

TEST(DeviceMemory, NoDeviceAllocationWhileDecoding) {
  auto backend = OpenClOrSkip();
  if (!backend) GTEST_SKIP() << "opencl unavailable";
  auto file = OpenModelFile(kModel);
  ASSERT_TRUE(file.ok());
  auto model =
      LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16, .kv_cache_tokens = 64});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const uint64_t at_load = backend->device().allocations;
  EXPECT_GE(at_load, 1u);  // the arena itself

  Generator gen(**model, nullptr);
  GenerateOptions opt;
  opt.max_new_tokens = 24;
  opt.sampling = SamplingParams::Greedy();
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // The second sequence's KV cache reuses the arena bytes the first one freed.
  for (int i = 0; i < 2; ++i) {
    auto seq = gen.NewSequence(64);
    ASSERT_TRUE(seq.ok()) << seq.status().message();
    auto result = gen.Generate(*seq, prompt, opt, nullptr);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->tokens.size(), 24u);
  }
  EXPECT_EQ(backend->device().allocations, at_load);
}

TEST(DeviceMemory, PlanCountsWhatTheLoadTakes) {
  auto file = OpenModelFile(kModel);
  ASSERT_TRUE(file.ok());
  auto plan = PlanMemory(*file, LoadOptions{.max_step_tokens = 16, .kv_cache_tokens = 64});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->kv_tokens, 64);
  // The CPU backend reports what it really allocated and bound: same numbers.
  auto cpu = CreateBackend("cpu", BackendOptions{.num_threads = 2});
  auto model = LoadModel(*file, **cpu, LoadOptions{.max_step_tokens = 16});
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(plan->activations, (*model)->activation_bytes());
  EXPECT_GE(plan->weights, (*model)->weight_bytes());
  EXPECT_GT(plan->kv_cache, 0u);
}

TEST(DeviceMemory, BudgetBelowThePlanFailsAtLoad) {
  auto backend = OpenClOrSkip(BackendOptions{.num_threads = 2, .mem_budget = 100000});
  if (!backend) GTEST_SKIP() << "opencl unavailable";
  auto file = OpenModelFile(kModel);
  ASSERT_TRUE(file.ok());
  auto model = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16});
  ASSERT_FALSE(model.ok());
  const std::string msg = model.status().message();
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--mem-budget allows 100000 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("KV cache"), std::string::npos) << msg;
}

TEST(DeviceMemory, PlanLargerThanTheDeviceFailsAtLoad) {
  auto backend = OpenClOrSkip(BackendOptions{.num_threads = 2, .mem_budget = uint64_t(1) << 50});
  if (!backend) GTEST_SKIP() << "opencl unavailable";
  auto file = OpenModelFile(kModel);
  ASSERT_TRUE(file.ok());
  auto model = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("has"), std::string::npos) << model.status().message();
}

}  // namespace
}  // namespace anymoe
