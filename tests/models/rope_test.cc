// RoPE frequency tables and the rotation kernel against transformers
// (tests/golden/rope/rope.json from tools/gen_rope_golden.py): default, linear,
// llama3, YaRN (mscale variants, attention_factor, truncate) and dynamic NTK.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/cpu/row_ops.h"
#include "formats/hf_config.h"
#include "models/config_loader.h"
#include "models/rope.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

json LoadRopeGolden() {
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/rope/rope.json");
  return json::parse(in);
}

// A minimal llama config.json around the golden case's rope_parameters, read
// through the same loader as real checkpoints.
ModelConfig ConfigFor(const json& c) {
  json cfg = {{"model_type", "llama"},       {"vocab_size", 32},
              {"hidden_size", c["head_dim"].get<int>() * 2}, {"num_hidden_layers", 1},
              {"num_attention_heads", 2},     {"intermediate_size", 8},
              {"head_dim", c["head_dim"]},    {"max_position_embeddings", c["max_position_embeddings"]},
              {"rope_parameters", c["rope_parameters"]}};
  auto hf = HfConfig::Parse(cfg.dump(), c["name"].get<std::string>());
  EXPECT_TRUE(hf.ok()) << hf.status().message();
  auto config = ModelConfigFromHf(**hf);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return *config;
}

TEST(RopeGolden, InvFreqAndAttentionScalingMatchTransformers) {
  const json golden = LoadRopeGolden();
  ASSERT_GE(golden["configs"].size(), 50u);
  for (const json& c : golden["configs"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ModelConfig config = ConfigFor(c);
    const int64_t seq_len = c["seq_len"].is_null() ? 0 : c["seq_len"].get<int64_t>();
    const RopeFrequencies f = ComputeRopeFrequencies(
        config.rope_theta, config.rotary_dims, config.rope_scaling,
        config.max_position_embeddings, seq_len);
    const auto want = c["inv_freq"].get<std::vector<double>>();
    ASSERT_EQ(f.inv_freq.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      // A few f32 ulps: pow and the llama3 blend round slightly differently from torch.
      EXPECT_NEAR(f.inv_freq[i], want[i], 1e-6 * std::fabs(want[i])) << "i=" << i;
    }
    EXPECT_NEAR(f.attention_factor, c["attention_scaling"].get<double>(), 1e-6);
  }
}

// Rotating the unit vector e_i in half-split layout yields (cos_i, sin_i) at
// (i, i + half), which is exactly what transformers tabulates.
TEST(RopeGolden, RotationKernelReproducesCosSinTables) {
  const json golden = LoadRopeGolden();
  for (const json& c : golden["cos_sin"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const int64_t dims = c["head_dim"].get<int64_t>();
    const auto inv = c["inv_freq_used"].get<std::vector<float>>();
    RopeTable table{.inv_freq = inv, .rotary_dims = int(dims),
                    .attention_factor = c["attention_scaling_used"].get<float>(),
                    .pairing = RopePairing::kHalfSplit};
    const auto positions = c["positions"].get<std::vector<int32_t>>();
    for (size_t p = 0; p < positions.size(); ++p) {
      for (int64_t i = 0; i < dims / 2; ++i) {
        std::vector<float> z(size_t(dims), 0.0f);
        z[size_t(i)] = 1.0f;
        cpu::RopeToken(z.data(), 1, dims, positions[p], table);
        EXPECT_NEAR(z[size_t(i)], c["cos"][p][i].get<double>(), 1e-6);
        EXPECT_NEAR(z[size_t(i + dims / 2)], c["sin"][p][i].get<double>(), 1e-6);
      }
    }
  }
}

TEST(Rope, InterleavedPairingRotatesAdjacentPairs) {
  const std::vector<float> inv = {0.5f, 0.25f};
  RopeTable table{.inv_freq = inv, .rotary_dims = 4, .pairing = RopePairing::kInterleaved};
  std::vector<float> z = {1, 0, 0, 1};
  cpu::RopeToken(z.data(), 1, 4, 3, table);
  EXPECT_NEAR(z[0], std::cos(1.5f), 1e-6);
  EXPECT_NEAR(z[1], std::sin(1.5f), 1e-6);
  EXPECT_NEAR(z[2], -std::sin(0.75f), 1e-6);
  EXPECT_NEAR(z[3], std::cos(0.75f), 1e-6);
}

TEST(Rope, RotaryOffsetRotatesOnlyTheTail) {
  const std::vector<float> inv = {1.0f};
  RopeTable table{.inv_freq = inv, .rotary_dims = 2, .rotary_offset = 2};
  std::vector<float> z = {1, 2, 1, 0};
  cpu::RopeToken(z.data(), 1, 4, 5, table);
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_EQ(z[1], 2.0f);
  EXPECT_NEAR(z[2], std::cos(5.0f), 1e-6);
  EXPECT_NEAR(z[3], std::sin(5.0f), 1e-6);
}

TEST(Rope, PartialRotaryLeavesTrailingDimsUntouched) {
  const std::vector<float> inv = {1.0f};
  RopeTable table{.inv_freq = inv, .rotary_dims = 2};
  std::vector<float> z = {1, 2, 3, 4};
  cpu::RopeToken(z.data(), 1, 4, 5, table);
  EXPECT_EQ(z[2], 3.0f);
  EXPECT_EQ(z[3], 4.0f);
  EXPECT_NEAR(z[0], std::cos(5.0f) - 2 * std::sin(5.0f), 1e-5);
}

}  // namespace
}  // namespace anymoe
