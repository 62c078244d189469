// Parameter counts from a config alone against the exact count of the model
// transformers builds from the same config (tests/golden/configs, from
// tools/gen_reference_configs.py) and the published active figures; the
// latent KV footprint of GLM-5; and, for every tiny checkpoint, the config count
// against the elements actually stored in the file.
#include "models/model_stats.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "models/config_loader.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

const std::string kConfigs = std::string(ANYMOE_GOLDEN_DIR) + "/configs/";

ModelConfig LoadConfig(const std::string& path) {
  auto hf = HfConfig::Load(path);
  EXPECT_TRUE(hf.ok()) << hf.status().message();
  auto c = ModelConfigFromHf(**hf);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(ParameterCounts, TotalsEqualWhatTransformersStoresExactly) {
  std::ifstream in(kConfigs + "parameter_counts.json");
  const auto golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["models"].size(), 5u);
  for (const auto& [name, m] : golden["models"].items()) {
    SCOPED_TRACE(name);
    const ModelConfig c = LoadConfig(kConfigs + m["config_file"].get<std::string>());
    EXPECT_EQ(CountParameters(c).total, m["transformers_stored_elements"].get<int64_t>());
  }
}

TEST(ParameterCounts, ActiveMatchesPublishedFigures) {
  struct Case {
    const char* file;
    double active_billions;  // as published by the model's authors
  };
  for (const Case& k : {Case{"glm5.json", 40}, Case{"deepseek_v3.json", 37},
                        Case{"glm4_5_air.json", 12}, Case{"mixtral_8x7b.json", 12.9}}) {
    SCOPED_TRACE(k.file);
    const double active = double(CountParameters(LoadConfig(kConfigs + k.file)).active) / 1e9;
    EXPECT_NEAR(active, k.active_billions, 0.1 * k.active_billions);
  }
}

TEST(KvFootprint, Glm5CachesTheLatentNotPerHeadKeysAndValues) {
  const KvFootprint kv = KvValuesPerToken(LoadConfig(kConfigs + "glm5.json"));
  // 78 layers x (kv_lora 512 + rope 64 + indexer key 128).
  EXPECT_EQ(kv.values_per_token, 78 * (512 + 64 + 128));
  // Per-head K (192 + 64) and V (256) for 64 heads.
  EXPECT_EQ(kv.full_kv_values_per_token, 78 * 64 * (192 + 64 + 256));
}

// Per cached key and token, from the published shapes: GLM-4.5-Air's GQA scores
// and values over 96 heads x 128; DeepSeek-V3's absorbed MLA, 128 heads x (latent
// 512 + rope 64) for the scores and 512 for the values; GLM-5 past its top-2048
// keys, only the lightning indexer's 32 heads x 128 on each of its 78 layers.
TEST(AttentionMacsPerKey, GqaMlaAndDsaFromThePublishedShapes) {
  EXPECT_EQ(AttentionMacsPerKey(LoadConfig(kConfigs + "glm4_5_air.json")), 46 * 2 * 96 * 128);
  EXPECT_EQ(AttentionMacsPerKey(LoadConfig(kConfigs + "deepseek_v3.json")),
            61 * 128 * (512 + 64 + 512));
  EXPECT_EQ(AttentionMacsPerKey(LoadConfig(kConfigs + "glm5.json")), 78 * 32 * 128);
}

class CheckpointCounts : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointCounts, ConfigCountEqualsStoredElements) {
  auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + GetParam());
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto config = LoadModelConfig(*file);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(CountParameters(*config).total, CountTensorElements(file->tensors()));
}

INSTANTIATE_TEST_SUITE_P(
    Golden, CheckpointCounts,
    ::testing::Values("llama_tiny", "llama_tiny_tied", "moe/glm_moe_dsa", "moe/glm_moe_dsa_dv20",
                      "moe/glm4_moe", "moe/glm4_moe_air", "moe/glm4_moe_lite", "moe/deepseek_v3",
                      "moe/qwen3_moe", "moe/mixtral"),
    [](const auto& info) {
      std::string n = info.param;
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

}  // namespace
}  // namespace anymoe
