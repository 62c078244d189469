// .npy reader/writer: round trips for each dtype, files written by NumPy (the
// golden set), and hostile headers that must be rejected with a clear error.
#include "core/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace anymoe {
namespace {

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("anymoe_npy_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

// A .npy image with the given header dict text and `data_bytes` zero bytes.
std::vector<uint8_t> Image(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(uint8_t(header.size() & 0xff));
  out.push_back(uint8_t(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

TEST_F(NpyTest, RoundTripsF32) {
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> shape = {2, 3};
  ASSERT_TRUE(WriteNpyF32(Path("a.npy"), shape, data).ok());
  Expected<NpyArray> a = ReadNpy(Path("a.npy"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->dtype, NpyDType::kF32);
  EXPECT_EQ(a->shape, shape);
  EXPECT_EQ(a->F32().value(), data);
  EXPECT_FALSE(a->I32().ok());  // no silent conversion
}

TEST_F(NpyTest, RoundTripsEveryDTypeAndRank) {
  const std::vector<int32_t> i32 = {-1, 7, 1 << 30};
  const std::vector<uint8_t> u8 = {0, 255};
  const std::vector<uint16_t> f16 = {0x3c00, 0x7c00, 0x0001, 0x8000};
  const std::vector<int64_t> s1 = {3}, s0 = {}, s2 = {2, 1}, s3 = {1, 2, 2}, empty = {0, 5};
  ASSERT_TRUE(WriteNpy(Path("i.npy"), NpyDType::kI32, s1, i32.data()).ok());
  ASSERT_TRUE(WriteNpy(Path("u.npy"), NpyDType::kU8, s2, u8.data()).ok());
  ASSERT_TRUE(WriteNpy(Path("h.npy"), NpyDType::kF16, s3, f16.data()).ok());
  ASSERT_TRUE(WriteNpy(Path("s.npy"), NpyDType::kI32, s0, i32.data()).ok());
  ASSERT_TRUE(WriteNpy(Path("e.npy"), NpyDType::kF32, empty, nullptr).ok());
  EXPECT_EQ(ReadNpy(Path("i.npy"))->I32().value(), i32);
  EXPECT_EQ(ReadNpy(Path("u.npy"))->U8().value(), u8);
  EXPECT_EQ(ReadNpy(Path("h.npy"))->F16Bits().value(), f16);
  EXPECT_EQ(ReadNpy(Path("h.npy"))->shape, s3);
  EXPECT_EQ(ReadNpy(Path("s.npy"))->shape, s0);
  EXPECT_EQ(ReadNpy(Path("s.npy"))->I32().value(), std::vector<int32_t>{-1});
  EXPECT_EQ(ReadNpy(Path("e.npy"))->elements(), 0);
}

TEST_F(NpyTest, WrittenHeaderIsWhatNumpyWrites) {
  const std::vector<float> data(12);
  const std::vector<int64_t> shape = {3, 4};
  ASSERT_TRUE(WriteNpyF32(Path("n.npy"), shape, data).ok());
  std::ifstream f(Path("n.npy"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 128u + 48u);  // header padded to 64 bytes, as numpy does
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
  EXPECT_EQ(bytes[127], '\n');
}

TEST_F(NpyTest, ReadsNumpyWrittenGolden) {
  Expected<NpyArray> a = ReadNpy(std::string(ANYMOE_GOLDEN_DIR) + "/dequant/q8_0_blocks.npy");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->dtype, NpyDType::kU8);
  ASSERT_EQ(a->shape.size(), 2u);
  EXPECT_EQ(a->shape[1], 34);
}

TEST_F(NpyTest, RejectsHostileHeaders) {
  const std::string ok_prefix = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  const std::vector<std::pair<std::vector<uint8_t>, std::string>> cases = {
      {Image(ok_prefix + "(2,), }", 4), "data is 4 bytes"},
      {Image(ok_prefix + "(2,), }", 12), "data is 12 bytes"},
      {Image(ok_prefix + "(4294967296, 4294967296), }", 0), "overflow"},
      {Image(ok_prefix + "(-1,), }", 0), "malformed shape"},
      {Image(ok_prefix + "(99999999999999999999,), }", 0), "malformed shape"},
      {Image("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8), "descr"},
      {Image("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4), "Fortran"},
      {Image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4),
       "repeated"},
      {Image("{'descr': '<f4', 'shape': (1,), }", 4), "lacks"},
      {Image("[1, 2]", 0), "not a dict"},
      {Image(ok_prefix + "(1,), } junk", 4), "trailing"},
      {{'n', 'o', 'p', 'e', 0, 0, 0, 0, 0, 0}, "bad magic"},
      {{0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 0, 0}, "version"},
      {{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff}, "past end of file"},
  };
  for (const auto& [bytes, want] : cases) {
    Expected<NpyArray> a = ParseNpy(bytes, "bad.npy");
    ASSERT_FALSE(a.ok()) << want;
    EXPECT_NE(a.status().message().find(want), std::string::npos) << a.status().message();
    EXPECT_EQ(a.status().message().rfind("bad.npy: ", 0), 0u) << a.status().message();
  }
}

TEST_F(NpyTest, EveryTruncationIsAnError) {
  const std::vector<float> data = {1, 2, 3};
  const std::vector<int64_t> shape = {3};
  ASSERT_TRUE(WriteNpyF32(Path("t.npy"), shape, data).ok());
  std::ifstream f(Path("t.npy"), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(ParseNpy(std::span(bytes.data(), n), "t.npy").ok()) << n;
  }
  EXPECT_TRUE(ParseNpy(bytes, "t.npy").ok());
}

TEST_F(NpyTest, ErrorsNameThePath) {
  Expected<NpyArray> a = ReadNpy(Path("missing.npy"));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("missing.npy"), std::string::npos);
  const std::vector<float> data = {1};
  const std::vector<int64_t> shape = {1};
  const Status s = WriteNpyF32(Path("no/such/dir/x.npy"), shape, data);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x.npy"), std::string::npos);
}

}  // namespace
}  // namespace anymoe
