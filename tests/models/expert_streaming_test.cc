// Streamed experts give exactly the numbers of resident ones: on every golden
// MoE model (HF folders, llama.cpp GGUFs, and Q8_0/Q4_0/Q4_1 copies that run
// the integer and panel kernels), with caches of one expert up to every
// expert, prefetch on or off, panels on or off in the slots, every eviction
// policy, prefill, decode and batched steps, logits are bitwise equal. Read
// faults, a truncated and a removed file give errors or right answers, never
// a crash; a cache smaller than one expert is refused naming the minimum.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>

#include "models/model.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

namespace fs = std::filesystem;

std::string Golden(const std::string& name) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + name; }

struct Loaded {
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded Load(const std::string& path, const ExpertCacheOptions& cache, bool copy_weights = false,
            bool repack = true) {
  Loaded l;
  auto file = OpenModelFile(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  l.file = std::move(file).value();
  l.backend = std::move(CreateBackend(
                            "cpu", BackendOptions{.num_threads = 2, .copy_weights = copy_weights}))
                  .value();
  LoadOptions options{.max_step_tokens = 64, .kv_type = DType::kF16};
  options.expert_cache = cache;
  auto model = LoadModel(l.file, *l.backend, options);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (model.ok()) l.model = std::move(model).value();
  return l;
}

std::vector<float> Read(Backend& b, const Tensor& t) {
  std::vector<float> v(size_t(t.elements()));
  b.ReadF32(t, v);
  return v;
}

// Prefill of 24 tokens (all logits), 6 decode steps, and a batched step of two
// sequences (a decode and a 5-token prefill): every logit, in order.
Expected<std::vector<float>> Trace(Loaded& l) {
  Model& m = *l.model;
  const int64_t vocab = m.config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(int32_t((i * 37 + 11) % vocab));
  std::vector<float> out;
  ASSIGN_OR_RETURN(auto cache, m.NewCache(64));
  ASSIGN_OR_RETURN(Tensor logits, m.Forward(prompt, *cache, true));
  auto v = Read(*l.backend, logits);
  out.insert(out.end(), v.begin(), v.end());
  for (int i = 0; i < 6; ++i) {
    const int32_t token = int32_t((i * 53 + 7) % vocab);
    ASSIGN_OR_RETURN(Tensor step, m.Forward({&token, 1}, *cache, false));
    v = Read(*l.backend, step);
    out.insert(out.end(), v.begin(), v.end());
  }
  ASSIGN_OR_RETURN(auto other, m.NewCache(64));
  const int32_t next = 5;
  const std::vector<int32_t> fresh = {9, 8, 7, 6, 5};
  const Model::SequenceStep steps[] = {{{&next, 1}, cache.get(), false},
                                       {fresh, other.get(), true}};
  ASSIGN_OR_RETURN(Tensor batch, m.ForwardBatch(steps));
  v = Read(*l.backend, batch);
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class StreamedExpertsMatch : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamedExpertsMatch, BitwiseAtEveryCacheSize) {
  const std::string path = Golden(GetParam());
  Loaded resident = Load(path, {});
  ASSERT_TRUE(resident.model);
  ASSERT_EQ(resident.model->streamed_bytes(), 0u);
  const auto expected = Trace(resident);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  const ModelConfig& c = resident.model->config();
  const int64_t e = c.moe.num_experts, k = c.moe.experts_per_token;
  const int64_t all = e * c.num_moe_layers();
  struct Case {
    int64_t slots;
    bool prefetch, pack;
    EvictionPolicy policy;
    // Slots through the device store (NewDeviceExpertSlots: one buffer per
    // part from Backend::Allocate, filled with Backend::WriteBytes), here on
    // the CPU backend; conformance/device_expert_cache_test.cc runs it on OpenCL.
    bool device = false;
  };
  const Case cases[] = {
      {1, true, false, EvictionPolicy::kLfru, true},
      {all / 2, true, false, EvictionPolicy::kLfru, true},
      {1, false, false, EvictionPolicy::kLru},
      {1, true, true, EvictionPolicy::kLfu},
      {k, true, true, EvictionPolicy::kLfru},
      {k + 1, false, true, EvictionPolicy::kLru},
      {e, true, false, EvictionPolicy::kLru},
      {e, true, true, EvictionPolicy::kLfu},
      {all / 2, true, true, EvictionPolicy::kLfru},
      {all, true, true, EvictionPolicy::kLru},
      {all, false, false, EvictionPolicy::kLfu},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE("slots " + std::to_string(cs.slots) + (cs.prefetch ? " prefetch" : "") +
                 (cs.pack ? " panels " : " ") + std::string(EvictionPolicyName(cs.policy)) +
                 (cs.device ? " device slots" : ""));
    ExpertCacheOptions options{.enabled = true,
                               .slots = cs.slots,
                               .policy = cs.policy,
                               .prefetch = cs.prefetch,
                               .pack_panels = cs.pack,
                               .device_slots = cs.device};
    Loaded streamed = Load(path, options);
    ASSERT_TRUE(streamed.model);
    EXPECT_GT(streamed.model->streamed_bytes(), 0u);
    const auto got = Trace(streamed);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(BitwiseEqual(*got, *expected));
    const ExpertCacheStats s = streamed.model->routing_stats().cache;
    EXPECT_TRUE(s.enabled);
    EXPECT_EQ(s.hits + s.misses, s.lookups);
    EXPECT_GT(s.bytes_read, 0u);
    EXPECT_EQ(s.read_errors, 0u);
    if (!cs.prefetch) {
      EXPECT_EQ(s.prefetches, 0u);
    }
    if (cs.slots >= all) {  // everything fits: each expert read once
      EXPECT_EQ(s.evictions, 0u);
      EXPECT_LE(s.loads, uint64_t(all));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Golden, StreamedExpertsMatch,
    ::testing::Values("moe/glm4_moe", "moe/glm4_moe_fused", "moe/glm4_moe_bf16", "moe/mixtral",
                      "moe/qwen3_moe", "moe/deepseek_v3", "moe/glm_moe_dsa",
                      "moe_gguf/glm4_moe.gguf", "moe_gguf/mixtral.gguf",
                      "moe_gguf/glm_moe_dsa.gguf", "moe_gguf/glm4_moe.q8_0.gguf",
                      "moe_gguf/glm4_moe.q4_0.gguf", "moe_gguf/glm4_moe.q4_1.gguf",
                      // FP8 block-scaled: each slot's views take the expert's scales
                      // (device slots: a copy of the grid after the matrix).
                      "fp8/deepseek_v3", "fp8/glm_moe_dsa"),
    [](const auto& info) {
      std::string n = info.param;
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

// Streamed models copy resident weights out of the file and read embedding
// rows from panel tables (UnpackPanelRow): the same bits as the file layout.
TEST(ExpertStreaming, PanelEmbeddingsAndCopiedWeightsMatchTheFileLayout) {
  for (const char* name : {"moe_gguf/glm4_moe.q8_0.gguf", "moe_gguf/glm4_moe.q4_0.gguf",
                           "moe_gguf/glm4_moe.q4_1.gguf"}) {
    SCOPED_TRACE(name);
    Loaded in_file = Load(Golden(name), {}, /*copy_weights=*/false, /*repack=*/false);
    Loaded copied = Load(Golden(name), {}, /*copy_weights=*/true, /*repack=*/true);
    const auto a = Trace(in_file), b = Trace(copied);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(BitwiseEqual(*a, *b));
  }
}

// The prefetch gate decides which predicted experts are read ahead, never the
// numbers: always open it reads every uncached prediction it has room for,
// and with a share no predictor reaches it stops reading ahead once it has
// judged enough candidates, counting the rest as skipped.
TEST(ExpertStreaming, PrefetchGateDecidesWhatIsReadAheadNotTheNumbers) {
  const std::string path = Golden("moe_gguf/glm4_moe.q8_0.gguf");
  // 4 x 100 decode steps: enough candidates for the gate to end its warm-up
  // (the tiny model predicts 2 of 8 experts of one layer per step, and its
  // routing changes little from token to token: ~13 candidates in 60 steps).
  const auto decode = [](Loaded& l) -> Expected<std::vector<float>> {
    Model& m = *l.model;
    std::unique_ptr<KvCache> cache;
    std::vector<float> out;
    for (int i = 0; i < 400; ++i) {
      if (i % 100 == 0) {  // a fresh sequence, within the model's 128 positions
        ASSIGN_OR_RETURN(cache, m.NewCache(100));
      }
      const int32_t token = int32_t((i * 53 + 7) % m.config().vocab_size);
      ASSIGN_OR_RETURN(Tensor step, m.Forward({&token, 1}, *cache, false));
      const auto v = Read(*l.backend, step);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  Loaded resident = Load(path, {});
  const auto expected = decode(resident);
  ASSERT_TRUE(expected.ok());
  const int64_t e = resident.model->config().moe.num_experts;
  // 0: always open; 0.01: open unless the used candidates go uncounted; 2: a
  // share no predictor reaches.
  ExpertCacheStats stats[3];
  for (int i = 0; i < 3; ++i) {
    const double min_use = i == 0 ? 0.0 : i == 1 ? 0.01 : 2.0;
    SCOPED_TRACE("prefetch_min_use " + std::to_string(min_use));
    // Slots for half of the 2 layers' experts: many predictions are not cached.
    Loaded streamed = Load(path, {.enabled = true, .slots = e, .prefetch_min_use = min_use});
    ASSERT_TRUE(streamed.model);
    const auto got = decode(streamed);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(BitwiseEqual(*got, *expected));
    stats[i] = streamed.model->routing_stats().cache;
  }
  EXPECT_EQ(stats[0].prefetch_skipped, 0u);
  EXPECT_GT(stats[0].prefetches, 0u);
  EXPECT_EQ(stats[1].prefetch_skipped, 0u);  // (how many are read depends on the I/O's timing)
  EXPECT_GT(stats[2].prefetch_skipped, 0u);
  EXPECT_LT(stats[2].prefetches, stats[0].prefetches);
  // Open during the warm-up only: its candidates and, per MoE layer, the
  // one prediction made before the gate heard how the warm-up's went.
  const int64_t layers = resident.model->config().num_moe_layers();
  EXPECT_LE(stats[2].prefetches, uint64_t(PrefetchGate::kWarmup) + uint64_t(layers * e));
}

TEST(ExpertStreaming, CacheSmallerThanOneExpertIsRefusedNamingTheMinimum) {
  auto file = OpenModelFile(Golden("moe_gguf/glm4_moe.gguf"));
  ASSERT_TRUE(file.ok());
  auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 1})).value();
  LoadOptions options;
  options.expert_cache = {.enabled = true, .bytes = 1000};
  auto model = LoadModel(*file, *backend, options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("the minimum is one expert"), std::string::npos)
      << model.status().message();
}

TEST(ExpertStreaming, ReadFaultFailsTheStepThenRecovers) {
  const std::string path = Golden("moe_gguf/glm4_moe.q8_0.gguf");
  Loaded resident = Load(path, {});
  const auto expected = Trace(resident);
  ASSERT_TRUE(expected.ok());
  auto fail = std::make_shared<std::atomic<bool>>(true);
  ExpertCacheOptions options{.enabled = true, .slots = 3};
  options.fault_hook = [fail](const FileSpan& span) {
    return fail->load()
               ? Status::Error("injected read error at offset " + std::to_string(span.offset))
               : Status::Ok();
  };
  Loaded streamed = Load(path, options);
  ASSERT_TRUE(streamed.model);
  auto cache = std::move(streamed.model->NewCache(64)).value();
  const int32_t token = 3;
  auto step = streamed.model->Forward({&token, 1}, *cache, false);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("injected read error"), std::string::npos);
  EXPECT_EQ(cache->length(), 0);  // nothing committed
  EXPECT_GT(streamed.model->routing_stats().cache.read_errors, 0u);
  fail->store(false);
  const auto got = Trace(streamed);  // the same model, reads working again
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(BitwiseEqual(*got, *expected));
}

class ExpertFileChanges : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("anymoe_expert_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    copy_ = (dir_ / "model.gguf").string();
    fs::copy_file(Golden("moe_gguf/glm4_moe.q8_0.gguf"), copy_,
                  fs::copy_options::overwrite_existing);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string copy_;
};

TEST_F(ExpertFileChanges, RemovedFileKeepsServingTheSameNumbers) {
  Loaded resident = Load(Golden("moe_gguf/glm4_moe.q8_0.gguf"), {});
  const auto expected = Trace(resident);
  ASSERT_TRUE(expected.ok());
  Loaded streamed = Load(copy_, {.enabled = true, .slots = 2}, /*copy_weights=*/true);
  ASSERT_TRUE(streamed.model);
  fs::remove(copy_);
  const auto got = Trace(streamed);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(BitwiseEqual(*got, *expected));
}

TEST_F(ExpertFileChanges, TruncatedFileFailsStepsWithAClearError) {
  Loaded streamed = Load(copy_, {.enabled = true, .slots = 2}, /*copy_weights=*/true);
  ASSERT_TRUE(streamed.model);
  fs::resize_file(copy_, fs::file_size(copy_) / 3);
  auto cache = std::move(streamed.model->NewCache(64)).value();
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  auto step = streamed.model->Forward(prompt, *cache, false);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("past the end of the file"), std::string::npos)
      << step.status().message();
  EXPECT_NE(step.status().message().find(copy_), std::string::npos);
}

}  // namespace
}  // namespace anymoe
