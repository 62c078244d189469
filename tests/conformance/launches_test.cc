// Launches per decode step on the OpenCL backend, counted by the shared device
// layer (Backend::launches): a dense GQA layer is five launches (norm + q/k/v,
// RoPE + cache writes + attention of every sequence, o + residual add, norm +
// gate/up + SwiGLU, down + residual add) whatever the number of sequences in
// the step, and a sequence's logits do not depend on the others in its step.
#include <gtest/gtest.h>

#include "models/kv_cache.h"
#include "models/model.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

struct StepCounts {
  uint64_t launches = 0;
  std::vector<float> first_logits;  // the first sequence's, after the decode step
};

// `n_seq` sequences of one pool, each prefilled with its own 3 tokens, then
// one decode step of one token each: the launches of that step.
StepCounts DecodeStep(Backend& backend, Model& model, int n_seq) {
  StepCounts out;
  auto pool = model.NewPool(4 * 64);
  EXPECT_TRUE(pool.ok()) << pool.status().message();
  if (!pool.ok()) return out;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<std::vector<int32_t>> prompts, next;
  for (int s = 0; s < n_seq; ++s) {
    caches.push_back(std::make_unique<KvCache>(pool->get(), 64));
    prompts.push_back({int32_t(1 + s), int32_t(7 + 2 * s), int32_t(3 + s)});
    next.push_back({int32_t(11 + s)});
    const Model::SequenceStep prefill{prompts.back(), caches.back().get(), false};
    EXPECT_TRUE(model.ForwardBatch(std::span(&prefill, 1)).ok());
  }
  std::vector<Model::SequenceStep> steps;
  for (int s = 0; s < n_seq; ++s) steps.push_back({next[size_t(s)], caches[size_t(s)].get(), false});
  const uint64_t before = backend.launches();
  auto logits = model.ForwardBatch(steps);
  out.launches = backend.launches() - before;
  EXPECT_TRUE(logits.ok()) << logits.status().message();
  if (!logits.ok()) return out;
  const int64_t vocab = logits->cols();
  std::vector<float> host(size_t(logits->elements()));
  backend.ReadF32(*logits, host);
  out.first_logits.assign(host.begin(), host.begin() + vocab);
  return out;
}

TEST(DeviceLaunches, DecodeStepIsFiveLaunchesPerLayerForAnyNumberOfSequences) {
  auto backend = CreateBackend("opencl", BackendOptions{.num_threads = 2});
  if (!backend.ok()) GTEST_SKIP() << "opencl unavailable: " << backend.status().message();
  auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny");
  ASSERT_TRUE(file.ok());
  auto model =
      LoadModel(*file, **backend, LoadOptions{.max_step_tokens = 8, .kv_cache_tokens = 256});
  ASSERT_TRUE(model.ok()) << model.status().message();
  const uint64_t layers = uint64_t((*model)->config().num_layers);
  const StepCounts one = DecodeStep(**backend, **model, 1);
  const StepCounts four = DecodeStep(**backend, **model, 4);
  // + the embedding, the gather of the logit rows, and the final norm + head.
  EXPECT_EQ(one.launches, 5 * layers + 3);
  EXPECT_EQ(four.launches, 5 * layers + 3);
  std::printf("[ opencl llama_tiny ] launches per decode step: %llu (1 sequence), %llu (4), "
              "%llu layers\n",
              static_cast<unsigned long long>(one.launches),
              static_cast<unsigned long long>(four.launches),
              static_cast<unsigned long long>(layers));
  // The first sequence's logits are the same bits alone and in company.
  ASSERT_FALSE(one.first_logits.empty());
  EXPECT_EQ(one.first_logits, four.first_logits);
}

}  // namespace
}  // namespace anymoe
