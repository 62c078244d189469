// tokenizer.json comes with a model from anywhere: a deeply nested document
// must be an error, not a stack overflow (nlohmann's copy and dump recurse
// once per level, nlohmann/json #5387).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "testing/scaling.h"
#include "testing/test_files.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

TEST(TokenizerJsonLimits, DeepNestingIsAnErrorNotACrash) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("anymoe_deep_tokenizer_" + std::to_string(getpid()) + ".json");
  for (const char* where : {"model", "pre_tokenizer", "added_tokens"}) {
    SCOPED_TRACE(where);
    {
      std::ofstream out(path);
      out << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, ")" << where << "\": ";
      out << std::string(200000, '[') << std::string(200000, ']') << "}";
    }
    auto tok = Tokenizer::FromHfJson(path.string(), "");
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find(path.string()), std::string::npos) << tok.status().message();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace anymoe

// ---- issue 20: validation before the tables are built, linear parsing ----

namespace anymoe {
namespace {

using nlohmann::json;

class TokenizerFileLimits : public testing::TempDirTest {
 protected:
  // A byte-level BPE tokenizer.json with `vocab` and `merges` as given.
  std::string WriteTokenizer(const json& vocab, const json& merges,
                             const json& added = json::array()) {
    const json t = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                    {"added_tokens", added},
                    {"pre_tokenizer",
                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                    {"decoder", {{"type", "ByteLevel"}}}};
    return WriteText("tokenizer.json", t.dump());
  }
  static json Letters() { return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}}; }
};

TEST_F(TokenizerFileLimits, MergesMustNameTokensOfTheVocabulary) {
  auto ok = Tokenizer::FromHfJson(WriteTokenizer(Letters(), {"a b", "ab c"}), "");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)->Encode("abc", false, false), (std::vector<int32_t>{4}));
  // As HF tokenizers (MergeTokenOutOfVocabulary): a merge naming an unknown
  // part or producing an unknown token is an error, not silently skipped.
  for (const json& merges :
       {json{"a x"}, json{"x b"}, json{"b c"}, json::array({json{"a", "q"}})}) {
    SCOPED_TRACE(merges.dump());
    auto bad = Tokenizer::FromHfJson(WriteTokenizer(Letters(), merges), "");
    EXPECT_TRUE(testing::HasError(bad.status(), "which is not in the vocabulary"));
  }
}

TEST_F(TokenizerFileLimits, GgufMergesMustNameTokensOfTheVocabulary) {
  const auto load = [&](const std::vector<std::string>& merges) {
    testing::GgufBuilder b;
    b.String("tokenizer.ggml.model", "gpt2");
    b.StringArray("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc"});
    b.StringArray("tokenizer.ggml.merges", merges);
    auto file = GgufFile::Open(Write("t.gguf", b.Build()));
    EXPECT_TRUE(file.ok());
    return Tokenizer::FromGguf(**file).status();
  };
  EXPECT_TRUE(load({"a b", "ab c"}).ok());
  EXPECT_TRUE(testing::HasError(load({"a b", "b c"}), "merge 1 names 'bc'"));
  EXPECT_TRUE(testing::HasError(load({"a z"}), "merge 0 names 'z'"));
}

// On main 53f1f7f one id of 2^24-1 sized two tables of 16M entries (1.2 GB)
// from a file of a few bytes. Ids must now be (nearly) dense.
TEST_F(TokenizerFileLimits, SparseIdsAreRefusedBeforeTablesAreSized) {
  json vocab = Letters();
  vocab["x"] = (1 << 24) - 1;
  EXPECT_TRUE(
      testing::HasError(Tokenizer::FromHfJson(WriteTokenizer(vocab, json::array()), "").status(),
                        "ids must be dense"));
  const json added = json::array({{{"id", 5000}, {"content", "<s>"}, {"special", true}}});
  EXPECT_TRUE(testing::HasError(
      Tokenizer::FromHfJson(WriteTokenizer(Letters(), json::array(), added), "").status(),
      "ids must be dense"));
  // A few unused ids before the added tokens are normal.
  const json near = json::array({{{"id", 100}, {"content", "<s>"}, {"special", true}}});
  EXPECT_TRUE(Tokenizer::FromHfJson(WriteTokenizer(Letters(), json::array(), near), "").ok());
}

TEST_F(TokenizerFileLimits, OverlongTokensAreRefused) {
  json vocab = Letters();
  vocab[std::string(kMaxTokenBytes + 1, 'a')] = 5;
  EXPECT_TRUE(testing::HasError(
      Tokenizer::FromHfJson(WriteTokenizer(vocab, json::array()), "").status(), "over the limit"));
  testing::GgufBuilder b;
  b.String("tokenizer.ggml.model", "gpt2");
  b.StringArray("tokenizer.ggml.tokens", {"a", std::string(20 << 20, 'a')});
  b.StringArray("tokenizer.ggml.merges", {});
  auto file = GgufFile::Open(Write("t.gguf", b.Build()));
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE(testing::HasError(Tokenizer::FromGguf(**file).status(),
                                "tokenizer.ggml.tokens[1] is 20971520 bytes"));
}

// tokenizer.json: linear in its size (issue 20, defect 2), timed as a ratio.
// The old callback parser rescanned the parent array at every closed object:
// added_tokens (objects) made it quadratic. The sizes put both tables well
// past the caches (at 10k-20k entries the second crosses from L2 to L3 and
// costs 3x, a constant factor, not a growth rate).
TEST_F(TokenizerFileLimits, TokenizerJsonIsLinear) {
  const auto build = [](size_t n) {
    json vocab = json::object();
    json merges = json::array();
    const char* letters = "abcdefghijklmnopqrstuvwxyz";
    for (int c = 0; c < 26; ++c) vocab[std::string(1, letters[c])] = c;
    for (int i = 0; i < 26 * 26; ++i) {
      const std::string l(1, letters[i % 26]), r(1, letters[i / 26]);
      vocab[l + r] = vocab.size();
      merges.push_back(l + " " + r);
    }
    for (size_t i = 0; vocab.size() < n; ++i) vocab["w" + std::to_string(i)] = vocab.size();
    json added = json::array();
    for (size_t i = 0; i < n; ++i) {
      added.push_back({{"id", n + i},
                       {"content", "<tok_" + std::to_string(i) + ">"},
                       {"special", true},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"single_word", false}});
    }
    return json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                {"added_tokens", added},
                {"pre_tokenizer",
                 {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                {"decoder", {{"type", "ByteLevel"}}}}
        .dump();
  };
  const std::string one = WriteText("one.json", build(25000)),
                    two = WriteText("two.json", build(100000));
  testing::GrowthOptions options;
  options.repeats = 4;
  testing::ExpectLinearGrowth(
      "tokenizer.json",
      [&](int scale) {
        auto t = Tokenizer::FromHfJson(scale == 1 ? one : two, "");
        ASSERT_TRUE(t.ok()) << t.status().message();
      },
      options);
}

// A Split pattern is untrusted (issue 47): one that backtracks exponentially
// fails the load with a named error within a second; one that only explodes on
// some text fails that request alone and the next one is served.
TEST_F(TokenizerFileLimits, HostileSplitPatternFailsAtLoadOrInItsRequestAlone) {
  const auto write = [&](const std::string& pattern) {
    const json t = {
        {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"x", 1}, {"y", 2}}}, {"merges", json::array()}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"decoder", {{"type", "ByteLevel"}}}};
    return WriteText("tokenizer.json", t.dump());
  };
  const auto start = std::chrono::steady_clock::now();
  auto catastrophic = Tokenizer::FromHfJson(write("(a+)+$"), "");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(catastrophic.ok());
  EXPECT_EQ(catastrophic.status().code(), "tokenizer_regex_rejected")
      << catastrophic.status().message();
  EXPECT_LT(seconds, 1.0);

  auto rejected = Tokenizer::FromHfJson(write("[a-"), "");
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), "tokenizer_regex_rejected");

  auto tok = Tokenizer::FromHfJson(write("(x+x+)+y|a"), "");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const auto request_start = std::chrono::steady_clock::now();
  auto hostile = (*tok)->TryEncode(std::string(64, 'x'), false, false);
  const double request_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - request_start).count();
  ASSERT_FALSE(hostile.ok());
  EXPECT_EQ(hostile.status().code(), "tokenizer_regex_limit");
  EXPECT_LT(request_seconds, 1.0);
  auto next = (*tok)->TryEncode("aa", false, false);
  ASSERT_TRUE(next.ok()) << next.status().message();
  EXPECT_EQ(*next, (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace anymoe
