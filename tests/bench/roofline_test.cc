// The decode roofline's bytes per token, checked against sums computed here
// straight from a safetensors header (not through anymoe's readers): all
// tensors but routed experts and the embedding table, plus one embedding row,
// plus k/E of the routed-expert bytes. The GGUF conversion of the same
// checkpoint must give the same figure, and a tied model reads its whole table.
#include "bench/roofline.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/config_loader.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

const std::string kGolden = ANYMOE_GOLDEN_DIR;

// name -> bytes of every tensor in a single-file safetensors checkpoint.
std::map<std::string, uint64_t> SafetensorsBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), sizeof(header_len));
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  const auto json = nlohmann::json::parse(header);
  const std::map<std::string, uint64_t> dtype_bytes = {{"F32", 4}, {"F16", 2}, {"BF16", 2}};
  std::map<std::string, uint64_t> bytes;
  for (const auto& [name, t] : json.items()) {
    if (name == "__metadata__") continue;
    uint64_t n = dtype_bytes.at(t["dtype"].get<std::string>());
    for (uint64_t d : t["shape"]) n *= d;
    bytes[name] = n;
  }
  return bytes;
}

struct Loaded {
  ModelFile file;
  ModelConfig config;
};

Loaded Load(const std::string& path) {
  auto file = OpenModelFile(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  auto config = LoadModelConfig(*file);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return {std::move(file).value(), std::move(config).value()};
}

TEST(ClassifyWeight, GgufAndHfNames) {
  EXPECT_EQ(ClassifyWeight("token_embd.weight"), WeightRole::kEmbedding);
  EXPECT_EQ(ClassifyWeight("model.embed_tokens.weight"), WeightRole::kEmbedding);
  EXPECT_EQ(ClassifyWeight("blk.3.ffn_gate_exps.weight"), WeightRole::kRoutedExpert);
  EXPECT_EQ(ClassifyWeight("blk.3.ffn_down_exps.weight"), WeightRole::kRoutedExpert);
  EXPECT_EQ(ClassifyWeight("model.layers.1.mlp.experts.7.up_proj.weight"),
            WeightRole::kRoutedExpert);
  EXPECT_EQ(ClassifyWeight("model.layers.1.mlp.experts.gate_up_proj"), WeightRole::kRoutedExpert);
  EXPECT_EQ(ClassifyWeight("model.layers.0.block_sparse_moe.experts.0.w1.weight"),
            WeightRole::kRoutedExpert);
  // Shared experts, the router and its bias are read by every token.
  EXPECT_EQ(ClassifyWeight("blk.3.ffn_up_shexp.weight"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("model.layers.1.mlp.shared_experts.up_proj.weight"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("model.layers.1.mlp.shared_expert.up_proj.weight"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("blk.3.ffn_gate_inp.weight"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("blk.3.exp_probs_b.bias"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("output.weight"), WeightRole::kOther);
  EXPECT_EQ(ClassifyWeight("lm_head.weight"), WeightRole::kOther);
}

TEST(DecodeBytes, Glm4MoeMatchesSafetensorsSums) {
  const std::string dir = kGolden + "/moe/glm4_moe";
  // Independent expectation from the header: 8 experts, top-2, vocab 512.
  uint64_t other = 0, embedding = 0, experts = 0;
  for (const auto& [name, bytes] : SafetensorsBytes(dir + "/model.safetensors")) {
    if (name == "model.embed_tokens.weight") {
      embedding += bytes;
    } else if (name.find(".mlp.experts.") != std::string::npos) {
      experts += bytes;
    } else {
      other += bytes;
    }
  }
  ASSERT_GT(experts, 0u);
  const double expected = double(other) + double(embedding) / 512 + double(experts) * 2 / 8;

  const Loaded m = Load(dir);
  ASSERT_EQ(m.config.moe.num_experts, 8);
  ASSERT_EQ(m.config.moe.experts_per_token, 2);
  auto d = DecodeBytesPerToken(m.file.tensors(), m.config);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->other, other);
  EXPECT_EQ(d->embedding, embedding);
  EXPECT_EQ(d->embedding_row, embedding / 512);
  EXPECT_EQ(d->routed_experts, experts);
  EXPECT_FALSE(d->tied_embeddings);
  EXPECT_DOUBLE_EQ(d->routed_fraction(), 0.25);
  EXPECT_DOUBLE_EQ(d->per_token(), expected);
}

TEST(DecodeBytes, GgufConversionGivesTheSameBytes) {
  // The same f32 weights, with experts stacked into ffn_*_exps tensors.
  const Loaded hf = Load(kGolden + "/moe/glm4_moe");
  const Loaded gguf = Load(kGolden + "/moe_gguf/glm4_moe.gguf");
  auto a = DecodeBytesPerToken(hf.file.tensors(), hf.config);
  auto b = DecodeBytesPerToken(gguf.file.tensors(), gguf.config);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->routed_experts, b->routed_experts);
  EXPECT_EQ(a->embedding_row, b->embedding_row);
  EXPECT_DOUBLE_EQ(a->per_token(), b->per_token());
}

TEST(DecodeBytes, DenseUntiedReadsAllButTheTable) {
  const std::string dir = kGolden + "/llama_tiny";
  uint64_t total = 0, embedding = 0;
  for (const auto& [name, bytes] : SafetensorsBytes(dir + "/model.safetensors")) {
    total += bytes;
    if (name == "model.embed_tokens.weight") embedding = bytes;
  }
  const Loaded m = Load(dir);
  auto d = DecodeBytesPerToken(m.file.tensors(), m.config);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->routed_experts, 0u);
  EXPECT_DOUBLE_EQ(d->per_token(),
                   double(total - embedding) + double(embedding / uint64_t(m.config.vocab_size)));
}

TEST(DecodeBytes, TiedHeadReadsTheWholeTable) {
  const std::string dir = kGolden + "/llama_tiny_tied";
  uint64_t total = 0;
  for (const auto& [name, bytes] : SafetensorsBytes(dir + "/model.safetensors")) total += bytes;
  const Loaded m = Load(dir);
  ASSERT_TRUE(m.config.tie_word_embeddings);
  auto d = DecodeBytesPerToken(m.file.tensors(), m.config);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->tied_embeddings);
  EXPECT_DOUBLE_EQ(d->per_token(), double(total));
}

TEST(DecodeBytes, ExpertsWithoutAMoeConfigIsAnError) {
  const Loaded m = Load(kGolden + "/moe_gguf/glm4_moe.gguf");
  ModelConfig dense = m.config;
  dense.moe = MoeConfig{};
  auto d = DecodeBytesPerToken(m.file.tensors(), dense);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("routed-expert"), std::string::npos);
}

TEST(Roofline, BoundAndPercent) {
  const Roofline r{.bandwidth_gbs = 20.0, .bytes_per_token = 100e6};
  EXPECT_DOUBLE_EQ(r.bound_tps(), 200.0);
  EXPECT_DOUBLE_EQ(r.percent_of_bound(50.0), 25.0);
  EXPECT_EQ(Roofline{}.bound_tps(), 0.0);
  EXPECT_EQ(Roofline{}.percent_of_bound(10.0), 0.0);
}

}  // namespace
}  // namespace anymoe
