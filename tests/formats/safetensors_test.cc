// safetensors reader: valid single files and sharded folders load; each rule of
// reliability.md §1.4 is broken once and must give a one-line error naming the
// file (and tensor); every truncation of a valid file is rejected.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "testing/test_files.h"

namespace anymoe {
namespace {

using testing::HasError;

// `u64 N | header | data_bytes bytes`, where N defaults to the header's size.
std::vector<uint8_t> St(const std::string& header, size_t data_bytes,
                        std::optional<uint64_t> n = std::nullopt) {
  std::vector<uint8_t> b;
  testing::PutLE<uint64_t>(b, n.value_or(header.size()));
  testing::Put(b, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(uint8_t(i));
  return b;
}

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// F32 [2,3] (24 B), BF16 [4] (8 B), F16 scalar (2 B), an empty F32 [0,3], metadata.
std::string ValidHeader() {
  return "{\"__metadata__\":{\"format\":\"pt\"}," + Entry("w", "F32", "[2,3]", 0, 24) + "," +
         Entry("b", "BF16", "[4]", 24, 32) + "," + Entry("s", "F16", "[]", 32, 34) + "," +
         Entry("e", "F32", "[0,3]", 34, 34) + "}  ";  // padded, as writers do
}

class SafetensorsTest : public testing::TempDirTest {
 protected:
  void ExpectError(const std::vector<uint8_t>& bytes, const std::string& want) {
    const std::string path = Write("bad.safetensors", bytes);
    Expected<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(path);
    EXPECT_TRUE(HasError(m.status(), want));
    if (!m.ok()) {
      EXPECT_EQ(m.status().message().rfind(path + ": ", 0), 0u) << m.status().message();
    }
  }
  void ExpectHeaderError(const std::string& header, size_t data, const std::string& want) {
    ExpectError(St(header, data), want);
  }
};

TEST_F(SafetensorsTest, ReadsValidFile) {
  const std::string path = Write("one.safetensors", St(ValidHeader(), 34));
  Expected<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const SafetensorsModel& st = **m;
  EXPECT_EQ(st.tensors().size(), 4u);
  EXPECT_EQ(st.description(), path);
  const TensorInfo* w = st.Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->bytes, 24u);
  EXPECT_EQ(w->data[5], 5);  // data byte i is i
  const TensorInfo* b = st.Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->data[0], 24);
  const TensorInfo* s = st.Find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->elements(), 1);
  EXPECT_EQ(st.Find("e")->elements(), 0);
  EXPECT_EQ(st.Find("missing"), nullptr);
  ASSERT_EQ(st.shards().size(), 1u);
  EXPECT_EQ(st.shards()[0].metadata.at("format"), "pt");
  EXPECT_EQ(st.ShardOf(*w), 0u);
}

TEST_F(SafetensorsTest, FolderWithSingleFile) {
  Write("model.safetensors", St(ValidHeader(), 34));
  Expected<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->tensors().size(), 4u);
}

TEST_F(SafetensorsTest, RejectsBadHeaderLength) {
  ExpectError({1, 2, 3}, "file is 3 bytes, too small");
  ExpectError(St("{}", 0, 1000), "header length 1000 runs past end of file (size 10)");
  ExpectError(St("{}", 0, ~0ull),
              "header length 18446744073709551615 exceeds the 100000000-byte limit");
  ExpectError(St("{}", 0, 100000001), "exceeds the 100000000-byte limit");
  ExpectError(St("{}", 0, ~0ull - 4), "exceeds");  // 8 + N would wrap
}

TEST_F(SafetensorsTest, RejectsBadJson) {
  ExpectHeaderError("[]", 0, "header is not a JSON object");
  ExpectHeaderError("\"x\"", 0, "header is not a JSON object");
  ExpectHeaderError("", 0, "header is not a JSON object");
  ExpectHeaderError("{\"a\":", 0, "invalid JSON");
  ExpectHeaderError("{\"a\xff\":1}", 0, "invalid JSON");  // not UTF-8
  ExpectHeaderError("{} {}", 0, "invalid JSON");
  ExpectHeaderError(
      "{" + Entry("w", "F32", "[1]", 0, 4) + "," + Entry("w", "F32", "[1]", 4, 8) + "}", 8,
      "duplicate JSON key 'w'");
  ExpectHeaderError("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", 0,
                    "JSON nesting deeper than");
}

TEST_F(SafetensorsTest, RejectsBadEntries) {
  ExpectHeaderError("{\"w\":1}", 0, "tensor 'w': entry is not an object");
  ExpectHeaderError("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
                    "needs dtype, shape and data_offsets");
  ExpectHeaderError("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
                    "tensor 'w': unexpected field 'x'");
  ExpectHeaderError("{" + Entry("w", "I64", "[1]", 0, 8) + "}", 8,
                    "tensor 'w': dtype 'I64' is not supported");
  ExpectHeaderError("{" + Entry("w", "F8_E4M3FNUZ", "[1]", 0, 1) + "}", 1,
                    "'F8_E4M3FNUZ' is not supported");
  ExpectHeaderError("{" + Entry("w", "F32", "[-1]", 0, 0) + "}", 0, "has an invalid dimension");
  ExpectHeaderError("{" + Entry("w", "F32", "[1.5]", 0, 0) + "}", 0, "has an invalid dimension");
  ExpectHeaderError("{" + Entry("w", "F32", "[281474976710656]", 0, 0) + "}", 0,
                    "invalid dimension");
  ExpectHeaderError("{" + Entry("w", "F32", "3", 0, 0) + "}", 0, "shape is not an array");
  ExpectHeaderError("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 0,
                    "data_offsets must be two non-negative integers");
  ExpectHeaderError("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 0,
                    "data_offsets must be two non-negative integers");
  ExpectHeaderError("{\"__metadata__\":{\"a\":1}}", 0, "__metadata__ value of 'a' is not a string");
  ExpectHeaderError("{\"__metadata__\":[]}", 0, "__metadata__ is not an object");
}

TEST_F(SafetensorsTest, RejectsBadSizesAndOffsets) {
  ExpectHeaderError("{" + Entry("w", "F32", "[2,3]", 0, 20) + "}", 20,
                    "tensor 'w': data_offsets [0, 20] hold 20 bytes, but F32 [2, 3] needs 24");
  ExpectHeaderError("{" + Entry("w", "F32", "[2]", 8, 0) + "}", 8, "end before they begin");
  ExpectHeaderError("{" + Entry("w", "F32", "[2]", 0, 8) + "}", 4,
                    "tensor 'w': data_offsets [0, 8] run past the 4-byte data section");
  ExpectHeaderError("{" + Entry("w", "F32", "[2]", 1ull << 40, (1ull << 40) + 8) + "}", 8,
                    "run past");
  // The safetensors-cpp overflow seed: this product wraps to 4 elements in 64 bits.
  ExpectHeaderError("{" + Entry("w", "F32", "[4194305,4194305,211106198978564]", 0, 16) + "}", 16,
                    "tensor 'w': shape [4194305, 4194305, 211106198978564] overflows a byte count");
  ExpectHeaderError("{" + Entry("w", "F32", "[4194305,4194305,4194305,4194305]", 0, 16) + "}", 16,
                    "overflows a byte count");
  ExpectHeaderError(
      "{" + Entry("a", "F32", "[2]", 0, 8) + "," + Entry("b", "F32", "[2]", 4, 12) + "}", 12,
      "tensor 'b': data_offsets [4, 12] overlap tensor 'a'");
  ExpectHeaderError(
      "{" + Entry("a", "F32", "[1]", 0, 4) + "," + Entry("b", "F32", "[1]", 8, 12) + "}", 12,
      "tensor 'b': data_offsets [8, 12] leave a gap after byte 4");
  ExpectHeaderError("{" + Entry("a", "F32", "[1]", 4, 8) + "}", 8, "leave a gap after byte 0");
  ExpectHeaderError("{" + Entry("a", "F32", "[1]", 0, 4) + "}", 6,
                    "2 trailing bytes after the last tensor");
}

TEST_F(SafetensorsTest, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = St(ValidHeader(), 34);
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path =
        Write("cut.safetensors", std::vector<uint8_t>(full.begin(), full.begin() + n));
    Expected<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(path);
    ASSERT_FALSE(m.ok()) << "prefix " << n;
    ASSERT_EQ(m.status().message().rfind(path + ": ", 0), 0u) << m.status().message();
  }
}

TEST_F(SafetensorsTest, RandomByteCorruptionNeverCrashes) {
  const std::vector<uint8_t> full = St(ValidHeader(), 34);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<uint8_t> b = full;
    for (int k = 0; k < 1 + int(rng() % 3); ++k) b[rng() % b.size()] = uint8_t(rng());
    Expected<std::unique_ptr<SafetensorsModel>> m =
        SafetensorsModel::Open(Write("fuzz.safetensors", b));
    if (!m.ok()) continue;
    uint32_t sum = 0;  // touch both ends of every accepted tensor
    for (const TensorInfo& t : (*m)->tensors()) {
      if (t.bytes > 0) sum += t.data[0] + t.data[t.bytes - 1];
    }
    (void)sum;
  }
}

class ShardedTest : public SafetensorsTest {
 protected:
  void WriteShards() {
    Write(
        "model-00001-of-00002.safetensors",
        St("{" + Entry("a", "F32", "[2]", 0, 8) + "," + Entry("b", "F16", "[2]", 8, 12) + "}", 12));
    Write("model-00002-of-00002.safetensors", St("{" + Entry("c", "BF16", "[3,1]", 0, 6) + "}", 6));
  }
  void WriteIndex(const std::string& weight_map) {
    WriteText("model.safetensors.index.json",
              "{\"metadata\":{\"total_size\":18},\"weight_map\":{" + weight_map + "}}");
  }
  static constexpr char kGoodMap[] =
      "\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00001-of-00002.safetensors\","
      "\"c\":\"model-00002-of-00002.safetensors\"";
};

TEST_F(ShardedTest, MergesShards) {
  WriteShards();
  WriteIndex(kGoodMap);
  for (const std::string& path : {dir_.string(), Path("model.safetensors.index.json")}) {
    Expected<std::unique_ptr<SafetensorsModel>> m = SafetensorsModel::Open(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->tensors().size(), 3u);
    EXPECT_EQ((*m)->shards().size(), 2u);
    const TensorInfo* c = (*m)->Find("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->shape, (std::vector<int64_t>{3, 1}));
    EXPECT_EQ((*m)->ShardOf(*c), 1u);
    EXPECT_EQ((*m)->ShardOf(*(*m)->Find("a")), 0u);
  }
}

TEST_F(ShardedTest, RejectsInconsistentIndex) {
  WriteShards();
  const std::string index = Path("model.safetensors.index.json");
  WriteIndex(std::string(kGoodMap) + ",\"d\":\"model-00002-of-00002.safetensors\"");
  EXPECT_TRUE(
      HasError(SafetensorsModel::Open(dir_.string()).status(), index + ": tensor 'd': mapped to "));
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(), "which lacks it"));
  WriteIndex(
      "\"a\":\"model-00002-of-00002.safetensors\",\"c\":\"model-00002-of-00002.safetensors\"");
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(), "tensor 'a': mapped to"));
  WriteIndex("\"a\":\"missing.safetensors\"");
  EXPECT_TRUE(
      HasError(SafetensorsModel::Open(dir_.string()).status(), "missing.safetensors: cannot open"));
  for (const char* bad : {"../x.safetensors", "/etc/passwd", "", "..", "sub/x.safetensors"}) {
    WriteIndex(std::string("\"a\":\"") + bad + "\"");
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(),
                         "shard must be a file name in the model folder"))
        << bad;
  }
  WriteIndex("\"a\":7");
  EXPECT_TRUE(
      HasError(SafetensorsModel::Open(dir_.string()).status(), "shard must be a file name"));
  WriteText("model.safetensors.index.json", "{\"metadata\":{}}");
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(), "no \"weight_map\" object"));
  WriteText("model.safetensors.index.json", "[1]");
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(), "no \"weight_map\" object"));
}

TEST_F(ShardedTest, RejectsTensorInTwoShards) {
  Write("s1.safetensors", St("{" + Entry("a", "F32", "[1]", 0, 4) + "}", 4));
  Write("s2.safetensors", St("{" + Entry("a", "F32", "[1]", 0, 4) + "}", 4));
  WriteIndex("\"a\":\"s1.safetensors\",\"x\":\"s2.safetensors\"");
  EXPECT_TRUE(
      HasError(SafetensorsModel::Open(dir_.string()).status(),
               Path("s2.safetensors") + ": tensor 'a': also present in " + Path("s1.safetensors")));
}

TEST_F(ShardedTest, ShardErrorsNameTheShard) {
  Write("s1.safetensors", St("{" + Entry("a", "F32", "[1]", 0, 8) + "}", 8));
  WriteIndex("\"a\":\"s1.safetensors\"");
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(),
                       Path("s1.safetensors") + ": tensor 'a': data_offsets"));
}

TEST_F(SafetensorsTest, EmptyFolderOrMissingFile) {
  EXPECT_TRUE(HasError(SafetensorsModel::Open(dir_.string()).status(),
                       "folder has neither model.safetensors.index.json nor model.safetensors"));
  EXPECT_TRUE(HasError(SafetensorsModel::Open(Path("nope.safetensors")).status(),
                       Path("nope.safetensors") + ": cannot open"));
}

}  // namespace
}  // namespace anymoe
