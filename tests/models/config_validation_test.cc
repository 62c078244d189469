// Model configs from hostile files (issue 20, defect 3 and weak points): every
// field is range-checked as it is read, with an error naming the file's own
// key, before anything is sized from it. On main 53f1f7f `num_hidden_layers:
// -1` aborted with std::length_error, 2^32-1 reached 14.7 GB, a float was
// truncated into an integer field (64.5 -> 64) or cast out of range (1e300,
// undefined behaviour), and a negative RoPE scaling factor was accepted.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "models/config_loader.h"
#include "testing/scaling.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

using nlohmann::json;
using testing::HasError;

json TinyLlama() {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny/config.json");
  return json::parse(in);
}

Status FromHf(const json& config) {
  auto hf = HfConfig::Parse(config.dump(), "config.json");
  if (!hf.ok()) return hf.status();
  return ModelConfigFromHf(**hf).status();
}

TEST(ConfigValidation, HfIntegerFieldsRefuseBadValuesNamingTheKey) {
  ASSERT_TRUE(FromHf(TinyLlama()).ok());
  struct Case {
    const char* key;
    json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"num_hidden_layers", -1, "out of range"},
      {"num_hidden_layers", 0, "out of range"},
      {"num_hidden_layers", 1e9, "out of range"},
      {"num_hidden_layers", 4294967295u, "out of range"},
      {"num_hidden_layers", 18446744073709551615u, "not an integer"},
      {"num_hidden_layers", 2.5, "not an integer"},
      {"num_hidden_layers", "2", "not an integer"},
      {"hidden_size", 64.5, "not an integer"},
      {"hidden_size", 1e300, "not an integer"},
      {"hidden_size", -1e300, "not an integer"},
      {"vocab_size", 1e300, "not an integer"},
      {"vocab_size", int64_t(1) << 40, "out of range"},
      {"head_dim", -16, "out of range"},
      {"intermediate_size", 1e18, "out of range"},
      {"num_attention_heads", 1e6, "out of range"},
      {"num_key_value_heads", 0.5, "not an integer"},
      {"max_position_embeddings", int64_t(1) << 40, "out of range"},
      {"rms_norm_eps", 1e300, "out of range"},
      {"rms_norm_eps", -1, "out of range"},
      {"rms_norm_eps", "small", "not a number"},
      {"tie_word_embeddings", 1, "not a boolean"},
  };
  for (const Case& c : cases) {
    json config = TinyLlama();
    config[c.key] = c.value;
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    const auto start = std::chrono::steady_clock::now();
    const Status st = FromHf(config);
    EXPECT_TRUE(HasError(st, std::string("config.json: ") + c.key));
    EXPECT_TRUE(HasError(st, c.needle));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  }
  // Integral floats are integers, as transformers writes them at times.
  json config = TinyLlama();
  config["hidden_size"] = 64.0;
  EXPECT_TRUE(FromHf(config).ok());
}

TEST(ConfigValidation, HfRopeScalingMustBePositiveAndFinite) {
  for (const json& scaling :
       {json{{"rope_type", "linear"}, {"factor", -2.0}},
        json{{"rope_type", "linear"}, {"factor", 0}},
        json{{"rope_type", "yarn"}, {"factor", 1e300}},
        json{{"rope_type", "yarn"}, {"factor", 4}, {"beta_fast", -1}},
        json{{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", -1}},
        json{{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", -5}},
        json{{"rope_type", "linear"}, {"factor", "2"}}}) {
    SCOPED_TRACE(scaling.dump());
    json config = TinyLlama();
    config.erase("rope_parameters");
    config["rope_scaling"] = scaling;
    EXPECT_TRUE(HasError(FromHf(config), "config.json: rope_scaling."));
  }
  json config = TinyLlama();
  config["partial_rotary_factor"] = 1e300;
  EXPECT_TRUE(HasError(FromHf(config), "partial_rotary_factor"));
  config = TinyLlama();
  config["rope_parameters"]["rope_theta"] = -1;
  EXPECT_TRUE(HasError(FromHf(config), "rope_parameters.rope_theta"));
  config = TinyLlama();
  config["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 10000}};
  EXPECT_TRUE(FromHf(config).ok());
}

TEST(ConfigValidation, HfMoeAndPerLayerFieldsAreChecked) {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm4_moe_lite/config.json");
  const json base = json::parse(in);
  ASSERT_TRUE(FromHf(base).ok());
  const size_t layers = base["num_hidden_layers"].get<size_t>();
  struct Case {
    const char* key;
    json value;
  };
  const std::vector<Case> cases = {
      {"n_routed_experts", 1e9},
      {"num_experts_per_tok", -1},
      {"n_shared_experts", 1e300},
      {"routed_scaling_factor", -1},
      {"mlp_layer_types", json::array({"dense"})},
      {"mlp_layer_types", json(std::vector<std::string>(layers, "moe"))},
      {"first_k_dense_replace", 1e9},
      {"kv_lora_rank", 2.5},
      {"q_lora_rank", -1},
  };
  for (const Case& c : cases) {
    json config = base;
    config[c.key] = c.value;
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    EXPECT_TRUE(HasError(FromHf(config), std::string("config.json: ") + c.key));
  }
}

class GgufConfigValidation : public testing::TempDirTest {
 protected:
  // A llama GGUF's config keys, one of them replaced by `extra`.
  Status Load(const std::function<void(testing::GgufBuilder&)>& extra) {
    testing::GgufBuilder b;
    b.String("general.architecture", "llama");
    std::map<std::string, uint32_t> ints = {
        {"llama.embedding_length", 64},     {"llama.block_count", 2},
        {"llama.feed_forward_length", 160}, {"llama.attention.head_count", 4},
        {"llama.context_length", 128},      {"llama.vocab_size", 512}};
    for (const auto& [k, v] : ints) b.Scalar<uint32_t>(k, testing::kTU32, v);
    b.Scalar<float>("llama.attention.layer_norm_rms_epsilon", testing::kTF32, 1e-5f);
    extra(b);
    auto file = GgufFile::Open(Write("c.gguf", b.Build()));
    if (!file.ok()) return file.status();
    return ModelConfigFromGguf(**file).status();
  }
};

TEST_F(GgufConfigValidation, KeysAreRangeCheckedBeforeAnythingIsSized) {
  ASSERT_TRUE(Load([](testing::GgufBuilder&) {}).ok());
  struct Case {
    const char* key;
    std::function<void(testing::GgufBuilder&)> add;
  };
  // Keys given twice are a GGUF error: these are keys the base lacks.
  const std::vector<Case> cases = {
      {"llama.attention.head_count_kv",
       [](auto& b) {
         b.template Scalar<int32_t>("llama.attention.head_count_kv", testing::kTI32, -1);
       }},
      {"llama.attention.key_length",
       [](auto& b) {
         b.template Scalar<uint64_t>("llama.attention.key_length", testing::kTU64,
                                     uint64_t(1) << 40);
       }},
      {"llama.rope.scaling.factor",
       [](auto& b) {
         b.template Scalar<float>("llama.rope.scaling.factor", testing::kTF32, -2.0f);
       }},
      {"llama.rope.freq_base",
       [](auto& b) { b.template Scalar<float>("llama.rope.freq_base", testing::kTF32, -1.0f); }},
      {"llama.expert_count",
       [](auto& b) { b.template Scalar<uint32_t>("llama.expert_count", testing::kTU32, 100000); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    EXPECT_TRUE(HasError(Load(c.add), std::string("metadata key '") + c.key + "'"));
  }
}

TEST_F(GgufConfigValidation, HugeLayerCountIsRefusedNamingTheKey) {
  for (uint64_t layers : {uint64_t(4294967295u), uint64_t(1) << 40, uint64_t(0)}) {
    SCOPED_TRACE(layers);
    testing::GgufBuilder b;
    b.String("general.architecture", "llama");
    b.Scalar<uint64_t>("llama.block_count", testing::kTU64, layers);
    for (const char* k : {"llama.embedding_length", "llama.feed_forward_length",
                          "llama.attention.head_count", "llama.context_length"}) {
      b.Scalar<uint32_t>(k, testing::kTU32, 64);
    }
    b.Scalar<float>("llama.attention.layer_norm_rms_epsilon", testing::kTF32, 1e-5f);
    auto file = GgufFile::Open(Write("l.gguf", b.Build()));
    ASSERT_TRUE(file.ok());
    EXPECT_TRUE(HasError(ModelConfigFromGguf(**file).status(), "'llama.block_count'"));
  }
}

// glm5-next (tools/gen_glm5_next_gguf.py's keys): each of its own keys is
// checked and named; a layer table of the wrong length or type, a rotary
// dimension on this NoPE model and a KPool that does not divide top_k are refused.
TEST_F(GgufConfigValidation, Glm5NextKeysAreCheckedNamingTheKey) {
  using Add = std::function<void(testing::GgufBuilder&)>;
  auto u32 = [](const char* key, uint32_t v) -> std::pair<const std::string, Add> {
    return {key, [=](auto& b) { b.template Scalar<uint32_t>(key, testing::kTU32, v); }};
  };
  auto f32 = [](const char* key, float v) -> std::pair<const std::string, Add> {
    return {key, [=](auto& b) { b.template Scalar<float>(key, testing::kTF32, v); }};
  };
  auto flags = [](const char* key, std::vector<uint8_t> v) -> std::pair<const std::string, Add> {
    return {key, [=](auto& b) { b.template Array<uint8_t>(key, testing::kTBool, v); }};
  };
  const std::map<std::string, Add> base = {
      u32("glm5-next.embedding_length", 64), u32("glm5-next.block_count", 2),
      u32("glm5-next.feed_forward_length", 96), u32("glm5-next.attention.head_count", 4),
      u32("glm5-next.context_length", 128), f32("glm5-next.attention.layer_norm_rms_epsilon", 1e-5f),
      u32("glm5-next.vocab_size", 512), u32("glm5-next.attention.q_lora_rank", 32),
      u32("glm5-next.attention.kv_lora_rank", 16), u32("glm5-next.attention.key_length_mla", 16),
      u32("glm5-next.attention.value_length_mla", 16),
      u32("glm5-next.attention.indexer.head_count", 8),
      u32("glm5-next.attention.indexer.key_length", 16),
      u32("glm5-next.attention.indexer.top_k", 8), u32("glm5-next.attention.indexer.kpool", 4),
      flags("glm5-next.kda.layers", {1, 0}), u32("glm5-next.kda.head_count", 2),
      u32("glm5-next.kda.head_dim", 16), u32("glm5-next.ssm.conv_kernel", 4),
      f32("glm5-next.kda.lower_bound", -5.0f), u32("glm5-next.hc.mult", 4),
      u32("glm5-next.hc.sinkhorn_iters", 20), f32("glm5-next.hc.eps", 1e-6f),
      f32("glm5-next.swiglu_limit", 10.0f)};
  auto load = [&](std::map<std::string, Add> keys) -> Expected<ModelConfig> {
    testing::GgufBuilder b;
    b.String("general.architecture", "glm5-next");
    for (const auto& [key, add] : keys) {
      if (add) add(b);
    }
    auto file = GgufFile::Open(Write("g.gguf", b.Build()));
    if (!file.ok()) return file.status();
    return ModelConfigFromGguf(**file);
  };
  auto ok = load(base);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->arch, "glm5_next");
  EXPECT_TRUE(ok->is_linear(0) && !ok->is_linear(1));
  EXPECT_TRUE(ok->kda.bounded_gate);
  struct Case {
    std::pair<const std::string, Add> change;  // a null Add removes the key
    const char* error;
  };
  const std::vector<Case> cases = {
      {{"glm5-next.kda.layers", nullptr}, "'glm5-next.kda.layers' is missing"},
      {flags("glm5-next.kda.layers", {1, 0, 1}), "'glm5-next.kda.layers' must list 2 layers"},
      {{"glm5-next.kda.layers",
        [](auto& b) { b.template Array<uint32_t>("glm5-next.kda.layers", testing::kTU32, {1, 0}); }},
       "'glm5-next.kda.layers' entry 0 is not a bool"},
      {flags("glm5-next.attention.indexer.types", {1}),
       "'glm5-next.attention.indexer.types' must list 2 layers"},
      {u32("glm5-next.rope.dimension_count", 8), "no rotary part"},
      {u32("glm5-next.attention.indexer.kpool", 3), "is not a multiple of"},
      {u32("glm5-next.hc.mult", 0), "'glm5-next.hc.mult'"},
      {u32("glm5-next.hc.sinkhorn_iters", 100000), "'glm5-next.hc.sinkhorn_iters'"},
      {f32("glm5-next.hc.eps", -1.0f), "'glm5-next.hc.eps'"},
      {f32("glm5-next.swiglu_limit", std::nanf("")), "'glm5-next.swiglu_limit'"},
      {f32("glm5-next.kda.lower_bound", 3.0f), "'glm5-next.kda.lower_bound'"},
      {u32("glm5-next.ssm.conv_kernel", 0), "'glm5-next.ssm.conv_kernel'"},
      {{"glm5-next.kda.head_dim", nullptr}, "'glm5-next.kda.head_dim' is missing"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.change.first);
    std::map<std::string, Add> keys = base;
    keys[c.change.first] = c.change.second;
    EXPECT_TRUE(HasError(load(keys).status(), c.error));
  }
  // Without kda.lower_bound the gate is unbounded (the HF config's null).
  std::map<std::string, Add> unbounded = base;
  unbounded.erase("glm5-next.kda.lower_bound");
  auto u = load(unbounded);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_FALSE(u->kda.bounded_gate);
}

// config.json: linear in the document (issue 20, defect 2), timed as a ratio.
TEST(ConfigScaling, ConfigJsonIsLinear) {
  const auto build = [](size_t n) {
    std::string s = TinyLlama().dump();
    s.pop_back();
    s += ",\"x\":[";
    for (size_t i = 0; i < n; ++i) s += i ? ",{}" : "{}";
    return s + "]}";
  };
  // Under config.json's 8,192 objects and arrays (HfConfig::kMaxContainers).
  const std::string one = build(2000), two = build(8000);
  testing::ExpectLinearGrowth("config.json", [&](int scale) {
    auto hf = HfConfig::Parse(scale == 1 ? one : two, "config.json");
    ASSERT_TRUE(hf.ok()) << hf.status().message();
    ASSERT_TRUE(ModelConfigFromHf(**hf).ok());
  });
}

}  // namespace
}  // namespace anymoe
