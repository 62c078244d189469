// GGUF reader: a valid v3/v2 file with metadata of every type and several tensor
// types reads back exactly; hostile variants (truncations at every length, huge
// counts and lengths, bad types, alignment, dims, offsets, duplicates, random
// byte flips) each give a one-line error naming the file, and never crash.
#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "testing/test_files.h"

namespace anymoe {
namespace {

using testing::GgufBuilder;
using testing::HasError;
using namespace anymoe::testing;  // kT* type ids

GgufBuilder ValidBuilder(uint32_t version = 3) {
  GgufBuilder g;
  g.version = version;
  g.String("general.architecture", "llama")
      .Scalar<uint8_t>("t.u8", kTU8, 250)
      .Scalar<int8_t>("t.i8", kTI8, -5)
      .Scalar<uint16_t>("t.u16", kTU16, 65000)
      .Scalar<int16_t>("t.i16", kTI16, -32000)
      .Scalar<uint32_t>("t.u32", kTU32, 4000000000u)
      .Scalar<int32_t>("t.i32", kTI32, -7)
      .Scalar<float>("t.f32", kTF32, 1e-5f)
      .Scalar<uint8_t>("t.bool", kTBool, 1)
      .Scalar<uint64_t>("t.u64", kTU64, 1ull << 40)
      .Scalar<int64_t>("t.i64", kTI64, -(1ll << 40))
      .Scalar<double>("t.f64", kTF64, 0.1)
      .String("t.string", "hello")
      .StringArray("t.strings", {"<s>", "", "\xe4\xb8\x96"})
      .Array<int32_t>("t.i32s", kTI32, {1, -2, 3})
      .Array<uint8_t>("t.u8s", kTU8, {0, 255})
      .Array<float>("t.f32s", kTF32, {0.5f, -1.5f})
      .Array<uint64_t>("t.u64s", kTU64, {1ull << 33})
      .Array<uint8_t>("t.bools", kTBool, {1, 0});
  g.AddTensor({"token_embd.weight", {4, 3}, 0})         // f32 [3, 4]
      .AddTensor({"blk.0.attn_q.weight", {64, 2}, 8})   // q8_0 [2, 64]
      .AddTensor({"blk.0.ffn_down.weight", {256}, 12})  // q4_k
      .AddTensor({"output_norm.weight", {4}, 30})       // bf16
      .AddTensor({"f16.weight", {2, 1, 1, 3}, 1})       // 4-d f16
      .AddTensor({"q6.weight", {256, 1}, 14})
      .AddTensor({"q5.weight", {256}, 13})
      .AddTensor({"q40.weight", {32}, 2})
      .AddTensor({"q41.weight", {32}, 3})
      .AddTensor({"ids", {5}, 26});
  return g;
}

class GgufTest : public testing::TempDirTest {
 protected:
  Expected<std::unique_ptr<GgufFile>> OpenBytes(const std::vector<uint8_t>& b,
                                                const std::string& name = "model.gguf") {
    return GgufFile::Open(Write(name, b));
  }
  // Opens `b` and expects an error that contains `want` and names the file.
  void ExpectError(const std::vector<uint8_t>& b, const std::string& want) {
    Expected<std::unique_ptr<GgufFile>> f = OpenBytes(b, "bad.gguf");
    EXPECT_TRUE(HasError(f.status(), want));
    if (!f.ok()) {
      EXPECT_EQ(f.status().message().rfind(Path("bad.gguf") + ": ", 0), 0u);
    }
  }
};

void CheckValidFile(const GgufFile& f, uint32_t version) {
  EXPECT_EQ(f.version(), version);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.metadata()[0].key, "general.architecture");
  EXPECT_EQ(f.GetString("general.architecture").value(), "llama");
  EXPECT_EQ(f.GetU32("t.u8").value(), 250u);
  EXPECT_EQ(f.GetI64("t.i8").value(), -5);
  EXPECT_EQ(f.GetU32("t.u16").value(), 65000u);
  EXPECT_EQ(f.GetI64("t.i16").value(), -32000);
  EXPECT_EQ(f.GetU32("t.u32").value(), 4000000000u);
  EXPECT_EQ(f.GetI64("t.i32").value(), -7);
  EXPECT_EQ(f.GetF32("t.f32").value(), 1e-5f);
  EXPECT_EQ(f.GetBool("t.bool").value(), true);
  EXPECT_EQ(f.GetU64("t.u64").value(), 1ull << 40);
  EXPECT_EQ(f.GetI64("t.i64").value(), -(1ll << 40));
  EXPECT_EQ(f.GetF32("t.f64").value(), 0.1f);
  EXPECT_EQ(f.FindValue("t.f64")->AsDouble().value(), 0.1);
  const auto strings = f.GetStringArray("t.strings").value();
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "<s>");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "\xe4\xb8\x96");
  EXPECT_EQ(f.GetI32Array("t.i32s").value(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.GetI32Array("t.u8s").value(), (std::vector<int32_t>{0, 255}));
  EXPECT_EQ(f.GetF32Array("t.f32s").value(), (std::vector<float>{0.5f, -1.5f}));
  EXPECT_EQ(f.FindValue("t.u64s")->IntAt(0).value(), 1ll << 33);
  EXPECT_EQ(f.FindValue("t.bools")->array_size(), 2u);

  ASSERT_EQ(f.tensors().size(), 10u);
  const TensorInfo* emb = f.Find("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::kF32);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(emb->rows(), 3);
  EXPECT_EQ(emb->cols(), 4);
  EXPECT_EQ(emb->bytes, 48u);
  const TensorInfo* q = f.Find("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(q->bytes, 2u * 2 * 34);
  EXPECT_EQ(f.Find("f16.weight")->shape, (std::vector<int64_t>{3, 1, 1, 2}));
  EXPECT_EQ(f.Find("f16.weight")->elements(), 6);
  EXPECT_EQ(f.Find("blk.0.ffn_down.weight")->bytes, 144u);
  EXPECT_EQ(f.Find("q6.weight")->bytes, 210u);
  EXPECT_EQ(f.Find("ids")->dtype, DType::kI32);
  EXPECT_EQ(f.Find("nope"), nullptr);
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ((t.data - emb->data) % 32, 0) << t.name;  // each tensor starts aligned
  }
  // The builder fills data byte i with (i*7+1): check a tensor points at its bytes.
  const size_t file_offset = size_t(q->data - emb->data) + f.data_offset();
  EXPECT_EQ(q->data[0], uint8_t(file_offset * 7 + 1));
}

TEST_F(GgufTest, ReadsValidV3) {
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(ValidBuilder(3).Build());
  ASSERT_TRUE(f.ok()) << f.status().message();
  CheckValidFile(**f, 3);
  EXPECT_EQ((*f)->description(), Path("model.gguf"));
}

TEST_F(GgufTest, ReadsValidV2) {
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(ValidBuilder(2).Build());
  ASSERT_TRUE(f.ok()) << f.status().message();
  CheckValidFile(**f, 2);
}

TEST_F(GgufTest, MetadataOnlyFile) {
  GgufBuilder g;
  g.String("general.name", "x");
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(g.Build());
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST_F(GgufTest, CustomAlignment) {
  GgufBuilder g;
  g.alignment = 64;
  g.Scalar<uint32_t>("general.alignment", kTU32, 64);
  g.AddTensor({"a", {3}, 0}).AddTensor({"b", {5}, 0});
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(g.Build());
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->Find("b")->data - (*f)->Find("a")->data, 64);
}

TEST_F(GgufTest, TypedGettersConvertOnlyWhatFits) {
  GgufBuilder g;
  g.Scalar<int32_t>("neg", kTI32, -1)
      .Scalar<uint64_t>("big", kTU64, 1ull << 32)
      .Scalar<uint64_t>("huge", kTU64, ~0ull)
      .Scalar<double>("f64big", kTF64, 1e300)
      .String("s", "str")
      .Array<uint32_t>("u32s", kTU32, {1u, 3000000000u})
      .Array<int32_t>("ints", kTI32, {1});
  Expected<std::unique_ptr<GgufFile>> fe = OpenBytes(g.Build());
  ASSERT_TRUE(fe.ok()) << fe.status().message();
  const GgufFile& f = **fe;
  EXPECT_TRUE(HasError(f.GetU32("neg").status(), "'neg' is i32 -1, expected an integer in u32"));
  EXPECT_EQ(f.GetI64("neg").value(), -1);
  EXPECT_TRUE(HasError(f.GetU32("big").status(), "expected an integer in u32 range"));
  EXPECT_EQ(f.GetU64("big").value(), 1ull << 32);
  EXPECT_FALSE(f.GetI64("huge").ok());
  EXPECT_EQ(f.GetU64("huge").value(), ~0ull);
  EXPECT_FALSE(f.GetF32("f64big").ok());
  EXPECT_TRUE(HasError(f.GetString("neg").status(), "expected a string"));
  EXPECT_TRUE(HasError(f.GetU32("s").status(), "'s' is string"));
  EXPECT_TRUE(HasError(f.GetU32("missing").status(), "metadata key 'missing' is missing"));
  EXPECT_TRUE(HasError(f.GetU32("missing").status(), Path("model.gguf")));
  EXPECT_FALSE(f.FindU32("missing").value().has_value());
  EXPECT_EQ(f.FindString("s").value().value(), "str");
  EXPECT_FALSE(f.FindU32("s").ok());
  EXPECT_TRUE(HasError(f.GetI32Array("u32s").status(), "element 1 does not fit in i32"));
  EXPECT_TRUE(HasError(f.GetF32Array("ints").status(), "expected an array of f32"));
  EXPECT_TRUE(HasError(f.GetStringArray("ints").status(), "expected an array of strings"));
  EXPECT_TRUE(HasError(f.GetU32("ints").status(), "an array of i32"));
  EXPECT_EQ(f.FindValue("u32s")->ToString(), "[1, 3000000000]");
}

TEST_F(GgufTest, EveryTruncationIsAnErrorNotACrash) {
  const std::vector<uint8_t> full = ValidBuilder().Build();
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
    Expected<std::unique_ptr<GgufFile>> f = OpenBytes(prefix, "cut.gguf");
    ASSERT_FALSE(f.ok()) << "prefix " << n << " of " << full.size() << " opened";
    ASSERT_EQ(f.status().message().rfind(Path("cut.gguf") + ": ", 0), 0u) << f.status().message();
  }
  EXPECT_TRUE(OpenBytes(full).ok());
}

TEST_F(GgufTest, RandomByteCorruptionNeverCrashes) {
  const std::vector<uint8_t> full = ValidBuilder().Build();
  std::mt19937 rng(1234);
  int opened = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % b.size();
      b[pos] = (rng() % 2) ? uint8_t(rng()) : uint8_t(b[pos] ^ (1u << (rng() % 8)));
    }
    Expected<std::unique_ptr<GgufFile>> f = OpenBytes(b, "fuzz.gguf");
    if (f.ok()) {
      ++opened;
      // Touch both ends of every accepted tensor: out-of-map bytes would fault.
      uint32_t sum = 0;
      for (const TensorInfo& t : (*f)->tensors()) sum += t.data[0] + t.data[t.bytes - 1];
      ::testing::StaticAssertTypeEq<uint32_t, decltype(sum)>();
    }
  }
  EXPECT_GT(opened, 0);  // flips inside tensor data must still open
}

TEST_F(GgufTest, RejectsBadHeader) {
  std::vector<uint8_t> b = ValidBuilder().Build();
  b[0] = 'X';
  ExpectError(b, "not a GGUF file (bad magic)");
  GgufBuilder g = ValidBuilder();
  g.version = 1;
  ExpectError(g.Build(), "unsupported GGUF version 1");
  g.version = 4;
  ExpectError(g.Build(), "unsupported GGUF version 4");
  g.version = 0x03000000;
  ExpectError(g.Build(), "big-endian");
  ExpectError({}, "truncated: magic needs 4 bytes");
}

TEST_F(GgufTest, RejectsHugeCounts) {
  GgufBuilder g = ValidBuilder();
  g.n_kv_override = ~0ull;
  ExpectError(g.Build(), "header: metadata count 18446744073709551615 exceeds the limit");
  g.n_kv_override = 100000;  // over the 65536 keys any real file comes near
  ExpectError(g.Build(), "metadata count 100000 exceeds the limit 65536");
  g.n_kv_override = 60000;
  ExpectError(g.Build(), "metadata count 60000 cannot fit in the");
  g = ValidBuilder();
  g.n_tensors_override = ~0ull;
  ExpectError(g.Build(), "tensor count 18446744073709551615 exceeds the limit");
  g.n_tensors_override = 50000;
  ExpectError(g.Build(), "tensor count 50000 cannot fit");
  g.n_tensors_override = 11;  // one more than present: reads into the data section
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(g.Build(), "bad.gguf");
  EXPECT_FALSE(f.ok());
}

TEST_F(GgufTest, RejectsHugeStringAndArrayLengths) {
  {
    GgufBuilder g;
    std::vector<uint8_t> p;
    testing::PutLE<uint64_t>(p, 1ull << 62);  // string length
    p.resize(p.size() + 16, 'a');
    g.Kv("general.name", kTString, p);
    ExpectError(
        g.Build(),
        "metadata key 'general.name': string value length 4611686018427387904 exceeds the limit");
  }
  {
    GgufBuilder g;
    std::vector<uint8_t> p;
    testing::PutLE<uint64_t>(p, 1000);  // under the cap, over the file
    g.Kv("general.name", kTString, p);
    ExpectError(g.Build(), "truncated: string value needs 1000 bytes");
  }
  {
    GgufBuilder g;
    std::vector<uint8_t> p;
    testing::PutLE<uint32_t>(p, kTU8);
    testing::PutLE<uint64_t>(p, ~0ull);
    g.Kv("tokenizer.ggml.scores", kTArray, p);
    ExpectError(g.Build(), "'tokenizer.ggml.scores': array length 18446744073709551615 exceeds");
  }
  {
    GgufBuilder g;
    std::vector<uint8_t> p;
    testing::PutLE<uint32_t>(p, kTString);
    testing::PutLE<uint64_t>(p, 1000000);
    testing::PutStr(p, "x");
    g.Kv("tokenizer.ggml.tokens", kTArray, p);
    ExpectError(g.Build(), "array of 1000000 string cannot fit");
  }
  {
    GgufBuilder g;
    std::vector<uint8_t> b;
    testing::PutLE<uint64_t>(b, ~0ull);  // key length
    g.Kv("", kTU8, b);
    std::vector<uint8_t> bytes = g.Build();
    // Patch the first key's length (right after the 24-byte header) to 2^64-1.
    const uint64_t huge = ~0ull;
    std::memcpy(bytes.data() + 24, &huge, 8);
    ExpectError(bytes, "key length 18446744073709551615 exceeds the limit");
  }
}

TEST_F(GgufTest, RejectsBadValueTypes) {
  GgufBuilder g;
  g.Kv("k", 13, {0, 0, 0, 0});
  ExpectError(g.Build(), "metadata key 'k': unknown value type 13");
  GgufBuilder g2;
  g2.Array<uint32_t>("k", kTArray, {kTU8, 0, 0});
  ExpectError(g2.Build(), "nested arrays are not supported");
  GgufBuilder g3;
  g3.Array<uint8_t>("k", 99, {1});
  ExpectError(g3.Build(), "unknown array element type 99");
  GgufBuilder g4;
  g4.Scalar<uint8_t>("k", kTBool, 2);
  ExpectError(g4.Build(), "bool value 2 is neither 0 nor 1");
}

TEST_F(GgufTest, RejectsDuplicates) {
  GgufBuilder g;
  g.String("general.name", "a").String("general.name", "b");
  ExpectError(g.Build(), "metadata key 'general.name': duplicate key");
  GgufBuilder t;
  t.AddTensor({"w", {4}, 0}).AddTensor({"w", {4}, 0});
  ExpectError(t.Build(), "tensor 'w': duplicate tensor name");
}

TEST_F(GgufTest, RejectsBadAlignment) {
  for (uint32_t a : {0u, 13u, 48u, 2u << 20}) {
    GgufBuilder g;
    g.Scalar<uint32_t>("general.alignment", kTU32, a);
    ExpectError(g.Build(), "alignment " + std::to_string(a) + " is not a power of two");
  }
  GgufBuilder g;
  g.Scalar<int32_t>("general.alignment", kTI32, 32);
  ExpectError(g.Build(), "'general.alignment': must be u32, found i32");
}

TEST_F(GgufTest, RejectsBadTensorInfo) {
  const auto one = [](GgufBuilder::Tensor t) {
    GgufBuilder g;
    g.AddTensor(std::move(t));
    return g.Build();
  };
  ExpectError(one({"w", {32}, 34}), "tensor 'w': unsupported tensor type tq1_0 (ggml type 34)");
  ExpectError(one({"w", {32}, 40}), "tensor 'w': unsupported tensor type nvfp4 (ggml type 40)");
  ExpectError(one({"w", {32}, 1000}), "unsupported tensor type ggml type 1000");
  ExpectError(one({"w", {1, 1, 1, 1, 1}, 0}), "dimension count 5 is not in [1, 4]");
  ExpectError(one({"w", {}, 0}), "dimension count 0 is not in [1, 4]");
  ExpectError(one({"w", {4, 0}, 0}), "dimension 1 is 0");
  ExpectError(one({"w", {1ull << 32, 1ull << 32}, 0}), "element count overflows");
  ExpectError(one({"w", {~0ull}, 0}), "dimension 0 is 18446744073709551615");
  ExpectError(one({"w", {1ull << 61, 4}, 0}), "element count overflows");
  ExpectError(one({"w", {1ull << 62}, 0}), "overflow a 64-bit byte count");
  ExpectError(one({"w", {100, 2}, 12}),
              "row of 100 elements is not a whole number of q4_k blocks (256)");
  ExpectError(one({"w", {32, 2}, 16}),
              "row of 32 elements is not a whole number of iq2_xxs blocks (256)");
  ExpectError(one({"w", {16}, 39}), "row of 16 elements is not a whole number of mxfp4 blocks (32)");
}

// Every type a real mixed release uses, one tensor each, reads back with its
// byte size; a file cut short inside the last block is rejected naming it.
TEST_F(GgufTest, ReadsEveryNewTypeAndRejectsATruncatedBlock) {
  const std::pair<uint32_t, DType> types[] = {
      {10, DType::kQ2_K},    {11, DType::kQ3_K},   {6, DType::kQ5_0},    {7, DType::kQ5_1},
      {19, DType::kIQ1_S},   {29, DType::kIQ1_M},  {16, DType::kIQ2_XXS}, {17, DType::kIQ2_XS},
      {22, DType::kIQ2_S},   {18, DType::kIQ3_XXS}, {21, DType::kIQ3_S}, {23, DType::kIQ4_XS},
      {20, DType::kIQ4_NL},  {39, DType::kMXFP4}};
  GgufBuilder g;
  for (const auto& [id, dtype] : types) {
    g.AddTensor({"t." + std::string(Name(dtype)), {256, 2}, id});
  }
  auto f = OpenBytes(g.Build());
  ASSERT_TRUE(f.ok()) << f.status().message();
  for (const auto& [id, dtype] : types) {
    const TensorInfo* t = (*f)->Find("t." + std::string(Name(dtype)));
    ASSERT_NE(t, nullptr) << Name(dtype);
    EXPECT_EQ(t->dtype, dtype);
    EXPECT_EQ(t->bytes, 2 * 256 / uint64_t(Info(dtype).block_elems) * Info(dtype).block_bytes);
  }
  GgufBuilder cut;
  cut.AddTensor({"a", {256}, 0}).AddTensor({"blk.0.ffn_down_exps.weight", {256, 2}, 16});
  cut.data_size_delta = -1;  // one byte short of the last iq2_xxs block
  ExpectError(cut.Build(), "tensor 'blk.0.ffn_down_exps.weight': data [offset");
}

TEST_F(GgufTest, RejectsBadTensorData) {
  const auto two = [](std::optional<uint64_t> second_offset) {
    GgufBuilder g;
    g.AddTensor({"a", {16}, 0}).AddTensor({"blk.0.attn_q.weight", {16}, 0, second_offset});
    return g;
  };
  ExpectError(two(1ull << 40).Build(), "tensor 'blk.0.attn_q.weight': data [offset ");
  ExpectError(two(1ull << 40).Build(), "64 bytes] ends past end of file (size ");
  ExpectError(two(~0ull & ~31ull).Build(), "ends past end of file");
  ExpectError(two(8).Build(), "data offset 8 is not a multiple of the alignment 32");
  GgufBuilder overlap = two(32);
  overlap.data_size_delta = 64;
  ExpectError(
      overlap.Build(),
      "tensor 'blk.0.attn_q.weight': data at offset 32 overlaps tensor 'a' [offset 0, 64 bytes]");
  GgufBuilder shortdata = two(std::nullopt);
  shortdata.data_size_delta = -1;
  ExpectError(shortdata.Build(), "tensor 'blk.0.attn_q.weight': data [offset");
  GgufBuilder longer = two(std::nullopt);
  longer.data_size_delta = 100;  // trailing bytes after the data are allowed
  EXPECT_TRUE(OpenBytes(longer.Build()).ok());
}

TEST_F(GgufTest, HostileNamesAreEscapedInErrors) {
  GgufBuilder g;
  g.String(std::string("bad\n\x01key", 8), "a").String(std::string("bad\n\x01key", 8), "b");
  Expected<std::unique_ptr<GgufFile>> f = OpenBytes(g.Build(), "bad.gguf");
  EXPECT_TRUE(HasError(f.status(), "'bad\\x0a\\x01key'"));
}

TEST_F(GgufTest, MissingFileNamesPath) {
  Expected<std::unique_ptr<GgufFile>> f = GgufFile::Open(Path("absent.gguf"));
  EXPECT_TRUE(HasError(f.status(), Path("absent.gguf")));
  EXPECT_TRUE(HasError(GgufFile::Open(Path("")).status(), "not a regular file"));
}

}  // namespace
}  // namespace anymoe
