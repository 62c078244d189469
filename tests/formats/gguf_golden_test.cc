// Reads tests/golden/gguf/tiny_v3.gguf, written by the reference writer
// (gguf.GGUFWriter via tools/gen_dequant_golden.py), and checks every value the
// generator put in: an independent check of our layout assumptions.
#include <gtest/gtest.h>

#include <cstring>

#include "core/half.h"
#include "formats/gguf.h"

namespace anymoe {
namespace {

TEST(GgufGoldenTest, ReadsWhatGgufPyWrote) {
  Expected<std::unique_ptr<GgufFile>> fe =
      GgufFile::Open(std::string(ANYMOE_GOLDEN_DIR) + "/gguf/tiny_v3.gguf");
  ASSERT_TRUE(fe.ok()) << fe.status().message();
  const GgufFile& f = **fe;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.GetString("general.architecture").value(), "tinytest");
  EXPECT_EQ(f.GetU32("test.u8").value(), 200u);
  EXPECT_EQ(f.GetI64("test.i8").value(), -100);
  EXPECT_EQ(f.GetU32("test.u16").value(), 60000u);
  EXPECT_EQ(f.GetI64("test.i16").value(), -30000);
  EXPECT_EQ(f.GetU32("test.u32").value(), 4000000000u);
  EXPECT_EQ(f.GetI64("test.i32").value(), -2000000000);
  EXPECT_EQ(f.GetF32("test.f32").value(), 0.15625f);
  EXPECT_EQ(f.GetU64("test.u64").value(), 18000000000000000000ull);
  EXPECT_EQ(f.GetI64("test.i64").value(), -9000000000000000000ll);
  EXPECT_EQ(f.FindValue("test.f64")->AsDouble().value(), 2.718281828459045);
  EXPECT_EQ(f.GetBool("test.bool").value(), true);
  EXPECT_EQ(f.GetString("test.string").value(), "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  const auto strings = f.GetStringArray("test.strings").value();
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[2],
            "\xc3\xbc"
            "ber");
  EXPECT_EQ(f.GetI32Array("test.i32s").value(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.GetF32Array("test.f32s").value(), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(f.GetI32Array("test.u8s").value(), (std::vector<int32_t>{1, 2, 255}));

  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo* f32 = f.Find("t.f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 3}));
  float v[6];
  std::memcpy(v, f32->data, sizeof(v));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], float(i));
  const TensorInfo* f16 = f.Find("t.f16");
  ASSERT_NE(f16, nullptr);
  std::vector<float> h(8);
  DequantizeRow(DType::kF16, f16->data, h.data(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(h[i], float(i) / 4);
  const TensorInfo* q8 = f.Find("t.q8_0");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->dtype, DType::kQ8_0);
  EXPECT_EQ(q8->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(q8->bytes, 68u);
  std::vector<float> q(64);
  DequantizeRow(DType::kQ8_0, q8->data, q.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(q[i], (i - 32) / 8.0f, 0.02f) << i;
}

}  // namespace
}  // namespace anymoe
