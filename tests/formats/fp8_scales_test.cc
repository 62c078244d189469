// FP8 block-quantised safetensors: weights pair with their `_scale_inv`, the
// config's quantization_config is read and honoured, and every inconsistency
// (missing or misshapen scales, a listed module stored as FP8, an unknown
// method) is a one-line error naming the file and tensor or key.
#include "formats/fp8_scales.h"

#include <gtest/gtest.h>

#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

using testing::HasError;

struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

// A single-file checkpoint holding `entries` (data bytes are 0, 1, 2, ...).
std::vector<uint8_t> Checkpoint(const std::vector<Entry>& entries) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    uint64_t bytes = e.dtype == "F32" ? 4 : e.dtype == "BF16" ? 2 : 1;
    std::string shape = "[";
    for (int64_t d : e.shape) {
      bytes *= uint64_t(d);
      shape += (shape.size() > 1 ? "," : "") + std::to_string(d);
    }
    if (header.size() > 1) header += ",";
    header += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  std::vector<uint8_t> b;
  testing::PutLE<uint64_t>(b, header.size());
  testing::Put(b, header.data(), header.size());
  for (uint64_t i = 0; i < offset; ++i) b.push_back(uint8_t(i));
  return b;
}

class Fp8ScalesTest : public testing::TempDirTest {
 protected:
  Expected<std::unique_ptr<SafetensorsModel>> Open(const std::vector<Entry>& entries,
                                                   const Fp8Quantization& q = {}) {
    return SafetensorsModel::Open(Write("m.safetensors", Checkpoint(entries)), q);
  }
  Fp8Quantization Quant(const std::string& json) {
    auto config = HfConfig::Parse(json, "config.json");
    EXPECT_TRUE(config.ok()) << config.status().message();
    auto q = ReadFp8Quantization(**config);
    EXPECT_TRUE(q.ok()) << q.status().message();
    return q.ok() ? *q : Fp8Quantization{};
  }
};

TEST_F(Fp8ScalesTest, PairsWeightsWithTheirBlockScales) {
  // 300 x 130 with 128 x 128 blocks: a 3 x 2 grid with partial blocks at both edges.
  auto m = Open({{"a.weight", "F8_E4M3", {300, 130}},
                 {"a.weight_scale_inv", "F32", {3, 2}},
                 {"b.weight", "F8_E5M2", {2, 8}},
                 {"b.weight_scale_inv", "F32", {1, 1}},
                 {"norm.weight", "BF16", {8}}});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const TensorInfo* a = (*m)->Find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF8_E4M3);
  EXPECT_EQ(a->bytes, 300u * 130u);
  EXPECT_EQ(a->scales.data, (*m)->Find("a.weight_scale_inv")->data);
  EXPECT_EQ(a->scales.rows, 128);
  EXPECT_EQ(a->scales.cols, 128);
  EXPECT_EQ((*m)->Find("b.weight")->dtype, DType::kF8_E5M2);
  EXPECT_FALSE((*m)->Find("norm.weight")->scales);
}

TEST_F(Fp8ScalesTest, BadScalesAreOneLineErrorsNamingTheTensor) {
  EXPECT_TRUE(HasError(Open({{"x.weight", "F8_E4M3", {256, 128}}}).status(),
                       "tensor 'x.weight': f8_e4m3 weight has no scale tensor "
                       "'x.weight_scale_inv'"));
  EXPECT_TRUE(HasError(
      Open({{"x.weight", "F8_E4M3", {257, 128}}, {"x.weight_scale_inv", "F32", {2, 2}}}).status(),
      "tensor 'x.weight': scale tensor 'x.weight_scale_inv' is f32 [2, 2], expected f32 [3, 1] "
      "(blocks of 128x128 over [257, 128])"));
  EXPECT_TRUE(HasError(
      Open({{"x.weight", "F8_E4M3", {128, 128}}, {"x.weight_scale_inv", "BF16", {1, 1}}}).status(),
      "scale tensor 'x.weight_scale_inv' is bf16 [1, 1], expected f32 [1, 1]"));
  EXPECT_TRUE(HasError(Open({{"x", "F8_E4M3", {4, 4, 4}}}).status(),
                       "tensor 'x': f8_e4m3 tensor of shape [4, 4, 4] is not a matrix"));
  const auto listed = Open({{"lm_head.weight", "F8_E4M3", {4, 4}},
                            {"lm_head.weight_scale_inv", "F32", {1, 1}}},
                           Quant(R"({"quantization_config": {"quant_method": "fp8",
                               "weight_block_size": [128, 128],
                               "modules_to_not_convert": ["lm_head"]}})"));
  EXPECT_TRUE(HasError(listed.status(),
                       "m.safetensors: tensor 'lm_head.weight': stored as f8_e4m3 but module "
                       "'lm_head' is in quantization_config.modules_to_not_convert"));
}

TEST_F(Fp8ScalesTest, BlockSizeComesFromTheConfig) {
  const Fp8Quantization q = Quant(R"({"quantization_config": {"quant_method": "fp8",
      "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [16, 24],
      "modules_to_not_convert": ["embed_tokens", "layers.78.shared_head.norm"]}})");
  EXPECT_TRUE(q.declared);
  EXPECT_EQ(q.block_rows, 16);
  EXPECT_EQ(q.block_cols, 24);
  EXPECT_EQ(q.modules_to_not_convert.size(), 2u);
  auto m = Open({{"x.weight", "F8_E4M3", {40, 50}}, {"x.weight_scale_inv", "F32", {3, 3}}}, q);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->Find("x.weight")->scales.rows, 16);
  EXPECT_FALSE(Quant("{}").declared);
}

TEST_F(Fp8ScalesTest, UnsupportedQuantizationConfigsAreErrors) {
  const auto error = [](const std::string& json) {
    auto config = HfConfig::Parse(json, "config.json");
    return ReadFp8Quantization(**config).status();
  };
  EXPECT_TRUE(HasError(error(R"({"quantization_config": {"quant_method": "gptq"}})"),
                       "config.json: quantization_config.quant_method 'gptq' is not supported"));
  EXPECT_TRUE(HasError(error(R"({"quantization_config": {"quant_method": "fp8"}})"),
                       "has no weight_block_size"));
  EXPECT_TRUE(HasError(error(R"({"quantization_config": {"quant_method": "fp8",
                           "weight_block_size": [0, 128]}})"),
                       "weight_block_size [0,128] is out of range"));
  EXPECT_TRUE(HasError(error(R"({"quantization_config": {"quant_method": "fp8",
                           "weight_block_size": [128, 128], "modules_to_not_convert": "x"}})"),
                       "modules_to_not_convert is not a list"));
}

}  // namespace
}  // namespace anymoe
