// Engine-level defaults that the CLI commands inherit.
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "core/system_memory.h"
#include "models/kv_cache.h"

namespace anymoe {
namespace {

EngineOptions TinyLlama() {
  EngineOptions o;
  o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny";
  o.threads = 1;
  o.progress = false;
  return o;
}

// Unless asked otherwise the cpu backend caches keys and values in f16 (half
// the memory and the bytes decode attention reads); an explicit type stands;
// types it cannot keep, and q8_0 for heads that are not whole blocks, are
// refused at load.
TEST(Engine, KvCacheIsF16OnTheCpuBackendUnlessAskedOtherwise) {
  EngineOptions o = TinyLlama();
  auto by_default = Engine::Load(o);
  ASSERT_TRUE(by_default.ok()) << by_default.status().message();
  EXPECT_EQ((*by_default)->kv_type(), DType::kF16);
  EXPECT_EQ(DefaultKvType((*by_default)->backend()), DType::kF16);

  o.kv_type = DType::kF32;
  auto f32 = Engine::Load(o);
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  EXPECT_EQ((*f32)->kv_type(), DType::kF32);

  o.kv_type = DType::kQ4_1;
  auto bad = Engine::Load(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use f32, f16, q8_0 or q4_0"), std::string::npos)
      << bad.status().message();

  o.kv_type = DType::kQ8_0;  // tiny llama's heads of 16 values are no whole q8_0 block
  auto unfit = Engine::Load(o);
  ASSERT_FALSE(unfit.ok());
  EXPECT_NE(unfit.status().message().find("needs multiples of 32"), std::string::npos)
      << unfit.status().message();
}

// The plan `info` and `serve` print (to compare with the process's RSS) is
// filled in when nothing streams too: a dense model's plan was all zeros. It
// holds every weight the model keeps and a KV pool for every sequence.
TEST(Engine, MemoryPlanIsFilledInWhenNothingStreams) {
  EngineOptions o = TinyLlama();
  o.context = 64;
  o.sequences = 2;
  for (const char* cache : {"auto", "off"}) {
    SCOPED_TRACE(cache);
    o.experts.cache = cache;
    auto e = Engine::Load(o);
    ASSERT_TRUE(e.ok()) << e.status().message();
    const ExpertStreamingPlan& p = (*e)->expert_streaming();
    EXPECT_FALSE(p.stream);
    EXPECT_EQ(p.resident.weights, (*e)->model().weight_bytes());
    const ModelConfig& c = (*e)->model().config();
    const uint64_t kv_bytes_per_token =
        uint64_t(c.num_layers * 2 * c.num_kv_heads * c.head_dim) * 2;
    EXPECT_GE(p.resident.kv_cache, 2 * 64 * kv_bytes_per_token);  // f16, both sequences
    EXPECT_GT(p.resident.activations, 0u);
    // What the process held before the weights, which the plan leaves out.
    EXPECT_GT((*e)->resident_before_weights(), 0u);
    EXPECT_LE((*e)->resident_before_weights(), ProcessResidentBytes());
  }
}

// The CPU backend's scratch that grows with the context (the DSA indexer's
// scores and picks, per thread and shared) is in the plan, as much as a pool
// of the planned size reserves; models without indexers reserve none (they
// reserved the indexer's for every key of the pool).
TEST(Engine, MemoryPlanHoldsTheContextScratch) {
  for (const char* model : {"/moe/glm_moe_dsa", "/llama_tiny"}) {
    SCOPED_TRACE(model);
    EngineOptions o = TinyLlama();
    o.model_path = std::string(ANYMOE_GOLDEN_DIR) + model;
    o.threads = 2;
    o.context = 64;
    o.sequences = 3;
    auto e = Engine::Load(o);
    ASSERT_TRUE(e.ok()) << e.status().message();
    const MemoryPlan& plan = (*e)->expert_streaming().resident;
    auto& cpu = dynamic_cast<CpuBackend&>((*e)->backend());
    EXPECT_EQ(cpu.scratch_bytes(), 0u);  // nothing reserved before a cache
    // The pool of every sequence, none longer than a context: as the server makes it.
    auto pool = (*e)->model().NewPool(plan.kv_tokens, o.context);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    EXPECT_EQ(cpu.scratch_bytes(), plan.context_scratch);
    if ((*e)->model().config().dsa.topk > 0) {
      // 8 decode queries' scores shared, and 9 (f32) or 16 (int16) arrays per
      // thread, each a float per key of the longest sequence.
      EXPECT_GE(plan.context_scratch, uint64_t(8 + 2 * 9) * 4 * uint64_t(o.context));
    } else {
      EXPECT_GT(plan.context_scratch, 0u);  // GQA: the attention tiles
    }
  }
}

// Steps never grow the CPU scratch past what the context reservation (and so
// the plan) holds: prefill chunks of the whole step, decode, two sequences in
// one step, with int8 or f32 activations, through every kind of weight (f32,
// bf16, integer kernels, a mixed k-/i-quant file, FP8 block-scaled weights on
// the dequantising path), dense and routed-expert matmuls, GQA and MLA
// attention (dense and DSA-selected keys).
TEST(Engine, StepsStayWithinTheReservedScratch) {
  for (const char* model :
       {"/llama_tiny", "/moe/glm4_moe", "/moe/glm4_moe_bf16", "/moe_gguf/glm4_moe.q8_0.gguf",
        "/moe_gguf/glm4_moe.q4_1.gguf", "/moe/deepseek_v3", "/moe/glm_moe_dsa",
        "/quant/glm_moe_dsa_w256_mixed.gguf", "/fp8/deepseek_v3"}) {
    for (bool exact : {false, true}) {
      SCOPED_TRACE(std::string(model) + (exact ? " exact" : ""));
      EngineOptions o = TinyLlama();
      o.model_path = std::string(ANYMOE_GOLDEN_DIR) + model;
      o.threads = 2;
      o.context = 48;
      o.sequences = 2;
      o.max_step_tokens = 40;
      o.exact_matmul = exact;
      auto e = Engine::Load(o);
      ASSERT_TRUE(e.ok()) << e.status().message();
      const MemoryPlan& plan = (*e)->expert_streaming().resident;
      auto& cpu = dynamic_cast<CpuBackend&>((*e)->backend());
      Model& m = (*e)->model();
      auto pool = m.NewPool(plan.kv_tokens, o.context);
      ASSERT_TRUE(pool.ok()) << pool.status().message();
      const uint64_t reserved = cpu.scratch_bytes();
      EXPECT_EQ(reserved, plan.context_scratch);
      KvCache a(pool->get(), o.context), b(pool->get(), o.context);
      std::vector<int32_t> prompt;
      for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 11) % m.config().vocab_size));
      ASSERT_TRUE(m.Forward(prompt, a, /*all_logits=*/true).ok());
      EXPECT_EQ(cpu.scratch_bytes(), reserved) << "prefill";
      for (int i = 0; i < 4; ++i) {
        const int32_t token = int32_t((i * 53 + 7) % m.config().vocab_size);
        ASSERT_TRUE(m.Forward({&token, 1}, a, false).ok());
      }
      EXPECT_EQ(cpu.scratch_bytes(), reserved) << "decode";
      const int32_t next = 5;
      const std::vector<int32_t> fresh(prompt.begin(), prompt.begin() + 30);
      const Model::SequenceStep steps[] = {{{&next, 1}, &a, false}, {fresh, &b, true}};
      ASSERT_TRUE(m.ForwardBatch(steps).ok());
      EXPECT_EQ(cpu.scratch_bytes(), reserved) << "two sequences";
    }
  }
}

}  // namespace
}  // namespace anymoe
