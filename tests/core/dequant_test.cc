// Dequantisers and half conversions against golden data from the `gguf` Python
// package (tools/gen_dequant_golden.py): results must match bit for bit, with any
// NaN equal to any NaN. Also checks the DType table and BytesFor's overflow guard.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/npy.h"

namespace anymoe {
namespace {

const std::string kDir = std::string(ANYMOE_GOLDEN_DIR) + "/dequant/";

NpyArray Load(const std::string& name) {
  Expected<NpyArray> a = ReadNpy(kDir + name);
  if (!a.ok()) ADD_FAILURE() << a.status().message();
  return a.ok() ? std::move(a).value() : NpyArray{};
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Number of positions where `got` and `want` differ in bits (NaN matches NaN).
int CountMismatches(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (Bits(got[i]) != Bits(want[i])) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " (0x" << std::hex
                      << Bits(got[i]) << "), want " << want[i] << " (0x" << Bits(want[i])
                      << std::dec << ")";
      }
    }
  }
  return bad;
}

struct GoldenCase {
  const char* name;
  DType dtype;
};
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

class DequantGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(DequantGoldenTest, MatchesGgufPackageBitExactly) {
  const GoldenCase& c = GetParam();
  const NpyArray blocks = Load(std::string(c.name) + "_blocks.npy");
  const NpyArray want = Load(std::string(c.name) + "_f32.npy");
  ASSERT_EQ(blocks.shape.size(), 2u);
  ASSERT_EQ(want.shape.size(), 2u);
  const DTypeInfo& info = Info(c.dtype);
  ASSERT_EQ(blocks.shape[1], info.block_bytes);
  ASSERT_EQ(want.shape[1], info.block_elems);
  ASSERT_EQ(blocks.shape[0], want.shape[0]);
  const int64_t n = want.elements();
  ASSERT_EQ(BytesFor(c.dtype, uint64_t(n)).value(), blocks.bytes.size());

  // The whole set as one row, and each block alone at an odd (unaligned) address.
  std::vector<float> got(size_t(n), -1.0f);
  DequantizeRow(c.dtype, blocks.bytes.data(), got.data(), n);
  const std::vector<float> expected = want.F32().value();
  EXPECT_EQ(CountMismatches(got, expected, c.name), 0);

  std::vector<uint8_t> unaligned(size_t(info.block_bytes) + 1);
  std::vector<float> one(size_t(info.block_elems));
  for (int64_t b = 0; b < blocks.shape[0]; ++b) {
    std::memcpy(unaligned.data() + 1, blocks.bytes.data() + b * info.block_bytes,
                size_t(info.block_bytes));
    DequantizeRow(c.dtype, unaligned.data() + 1, one.data(), info.block_elems);
    const std::vector<float> slice(expected.begin() + b * info.block_elems,
                                   expected.begin() + (b + 1) * info.block_elems);
    EXPECT_EQ(CountMismatches(one, slice, std::string(c.name) + " block"), 0) << "block " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DequantGoldenTest,
    ::testing::Values(GoldenCase{"q8_0", DType::kQ8_0}, GoldenCase{"q4_0", DType::kQ4_0},
                      GoldenCase{"q4_1", DType::kQ4_1}, GoldenCase{"q4_k", DType::kQ4_K},
                      GoldenCase{"q5_k", DType::kQ5_K}, GoldenCase{"q6_k", DType::kQ6_K},
                      GoldenCase{"f16", DType::kF16}, GoldenCase{"bf16", DType::kBF16},
                      GoldenCase{"q2_k", DType::kQ2_K}, GoldenCase{"q3_k", DType::kQ3_K},
                      GoldenCase{"q5_0", DType::kQ5_0}, GoldenCase{"q5_1", DType::kQ5_1},
                      GoldenCase{"iq1_s", DType::kIQ1_S}, GoldenCase{"iq1_m", DType::kIQ1_M},
                      GoldenCase{"iq2_xxs", DType::kIQ2_XXS}, GoldenCase{"iq2_xs", DType::kIQ2_XS},
                      GoldenCase{"iq2_s", DType::kIQ2_S}, GoldenCase{"iq3_xxs", DType::kIQ3_XXS},
                      GoldenCase{"iq3_s", DType::kIQ3_S}, GoldenCase{"iq4_xs", DType::kIQ4_XS},
                      GoldenCase{"iq4_nl", DType::kIQ4_NL}, GoldenCase{"mxfp4", DType::kMXFP4},
                      GoldenCase{"f8_e4m3", DType::kF8_E4M3},
                      GoldenCase{"f8_e5m2", DType::kF8_E5M2}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(DequantTest, F32IsACopy) {
  const std::vector<float> src = {1.5f, -0.0f, NAN, 3e38f, 1e-45f};
  std::vector<float> dst(src.size());
  DequantizeRow(DType::kF32, src.data(), dst.data(), int64_t(src.size()));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size() * 4), 0);
}

TEST(DequantTest, I32ConvertsValues) {
  const std::vector<int32_t> src = {0, -7, 123456};
  std::vector<float> dst(src.size());
  DequantizeRow(DType::kI32, src.data(), dst.data(), int64_t(src.size()));
  EXPECT_EQ(dst, (std::vector<float>{0.0f, -7.0f, 123456.0f}));
}

TEST(DequantTest, ZeroElementsWritesNothing) {
  float sentinel = 42.0f;
  DequantizeRow(DType::kQ4_K, nullptr, &sentinel, 0);
  EXPECT_EQ(sentinel, 42.0f);
}

// ---- half conversions ----

TEST(HalfTest, F32ToF16MatchesNumpyRounding) {
  const std::vector<float> in = Load("f32_to_f16_in.npy").F32().value();
  const std::vector<uint16_t> want = Load("f32_to_f16_out.npy").F16Bits().value();
  ASSERT_EQ(in.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t got = F32ToF16(in[i]);
    const bool both_nan = (got & 0x7fff) > 0x7c00 && (want[i] & 0x7fff) > 0x7c00;
    if (!both_nan && got != want[i] && ++bad <= 5) {
      ADD_FAILURE() << "F32ToF16(" << in[i] << ") = 0x" << std::hex << got << ", want 0x"
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(HalfTest, F32ToBF16MatchesGgufQuantizer) {
  const std::vector<float> in = Load("f32_to_bf16_in.npy").F32().value();
  const std::vector<int32_t> want = Load("f32_to_bf16_out.npy").I32().value();
  ASSERT_EQ(in.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t got = F32ToBF16(in[i]);
    if (got != uint16_t(want[i]) && ++bad <= 5) {
      ADD_FAILURE() << "F32ToBF16(" << in[i] << ") = 0x" << std::hex << got << ", want 0x"
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

// Every finite half and bfloat16 survives a round trip through f32 unchanged, and
// NaNs stay NaN.
TEST(HalfTest, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(uint16_t(h));
    if ((h & 0x7fff) > 0x7c00) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_GT(F32ToF16(f) & 0x7fff, 0x7c00) << std::hex << h;
    } else {
      ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
    }
    const float b = BF16ToF32(uint16_t(h));
    if ((h & 0x7fff) > 0x7f80) {
      ASSERT_TRUE(std::isnan(b)) << std::hex << h;
    } else {
      ASSERT_EQ(F32ToBF16(b), h) << std::hex << h;
    }
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);               // rounds up to infinity
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest subnormal: even
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // halfway, even
}

// ---- type table ----

TEST(DTypeTest, GgmlIdsRoundTrip) {
  const std::pair<DType, uint32_t> ids[] = {
      {DType::kF32, 0},   {DType::kF16, 1},   {DType::kQ4_0, 2},  {DType::kQ4_1, 3},
      {DType::kQ8_0, 8},  {DType::kQ4_K, 12}, {DType::kQ5_K, 13}, {DType::kQ6_K, 14},
      {DType::kBF16, 30}, {DType::kI32, 26},  {DType::kQ2_K, 10}, {DType::kQ3_K, 11},
      {DType::kQ5_0, 6},  {DType::kQ5_1, 7},  {DType::kIQ1_S, 19}, {DType::kIQ1_M, 29},
      {DType::kIQ2_XXS, 16}, {DType::kIQ2_XS, 17}, {DType::kIQ2_S, 22}, {DType::kIQ3_XXS, 18},
      {DType::kIQ3_S, 21}, {DType::kIQ4_XS, 23}, {DType::kIQ4_NL, 20}, {DType::kMXFP4, 39}};
  for (const auto& [dtype, id] : ids) {
    EXPECT_EQ(GgmlTypeOf(dtype), id) << Name(dtype);
    EXPECT_EQ(DTypeFromGgmlType(id), dtype) << id;
  }
  // q4_2/q4_3 (removed), q8_1, q8_k (intermediate only), ternary and repacked
  // layouts, i8..f64 tensors, nvfp4, q1_0, unknown ids.
  for (uint32_t unsupported : {4u, 5u, 9u, 15u, 24u, 25u, 27u, 28u, 31u, 34u, 35u, 36u, 40u, 41u,
                               1000u}) {
    EXPECT_FALSE(DTypeFromGgmlType(unsupported).has_value()) << unsupported;
  }
}

TEST(DTypeTest, BlockSizesMatchGgml) {
  EXPECT_EQ(Info(DType::kQ8_0).block_bytes, 34);
  EXPECT_EQ(Info(DType::kQ4_0).block_bytes, 18);
  EXPECT_EQ(Info(DType::kQ4_1).block_bytes, 20);
  EXPECT_EQ(Info(DType::kQ4_K).block_bytes, 144);
  EXPECT_EQ(Info(DType::kQ5_K).block_bytes, 176);
  EXPECT_EQ(Info(DType::kQ6_K).block_bytes, 210);
  EXPECT_EQ(Info(DType::kQ6_K).block_elems, 256);
  // The new types, against GGML_QUANT_SIZES of the gguf package.
  const std::tuple<DType, int, int> sizes[] = {
      {DType::kQ2_K, 256, 84},     {DType::kQ3_K, 256, 110},   {DType::kQ5_0, 32, 22},
      {DType::kQ5_1, 32, 24},      {DType::kIQ1_S, 256, 50},   {DType::kIQ1_M, 256, 56},
      {DType::kIQ2_XXS, 256, 66},  {DType::kIQ2_XS, 256, 74},  {DType::kIQ2_S, 256, 82},
      {DType::kIQ3_XXS, 256, 98},  {DType::kIQ3_S, 256, 110},  {DType::kIQ4_XS, 256, 136},
      {DType::kIQ4_NL, 32, 18},    {DType::kMXFP4, 32, 17},    {DType::kF8_E4M3, 1, 1},
      {DType::kF8_E5M2, 1, 1}};
  for (const auto& [dtype, elems, bytes] : sizes) {
    EXPECT_EQ(Info(dtype).block_elems, elems) << Name(dtype);
    EXPECT_EQ(Info(dtype).block_bytes, bytes) << Name(dtype);
  }
  EXPECT_EQ(Name(DType::kBF16), "bf16");
  EXPECT_FALSE(Info(DType::kF32).quantized);
  EXPECT_TRUE(Info(DType::kQ4_K).quantized);
}

TEST(DTypeTest, BytesForChecksBlocksAndOverflow) {
  EXPECT_EQ(BytesFor(DType::kF32, 10).value(), 40u);
  EXPECT_EQ(BytesFor(DType::kQ4_K, 512).value(), 288u);
  EXPECT_EQ(BytesFor(DType::kQ8_0, 0).value(), 0u);
  EXPECT_FALSE(BytesFor(DType::kQ4_K, 100).ok());
  EXPECT_FALSE(BytesFor(DType::kF32, uint64_t(1) << 62).ok());
  EXPECT_FALSE(BytesFor(DType::kQ8_0, ~uint64_t(0) & ~uint64_t(31)).ok());
  const Status s = BytesFor(DType::kQ8_0, 33).status();
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace anymoe
