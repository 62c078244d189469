// Spot checks of the scanners on cases where the regex alternatives interact (the
// expected pieces are what HF tokenizers' Split / ByteLevel produce), and the
// GGUF pre-tokenizer name table.
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/pre_tokenizer_pipeline.h"

#include <gtest/gtest.h>

namespace anymoe {
namespace {

std::vector<std::string> Pieces(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string_view> views;
  PreTokenize(kind, text, &views);
  return {views.begin(), views.end()};
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2) {
  const auto k = PreTokenizerKind::kGpt2;
  EXPECT_EQ(Pieces(k, "Hello world's  end"), (V{"Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(Pieces(k, "x  \t\ny"), (V{"x", "  \t", "\n", "y"}));
  EXPECT_EQ(Pieces(k, "a'Sb 'LL"), (V{"a", "'", "Sb", " '", "LL"}));
  EXPECT_EQ(Pieces(k, " 123abc!!  "), (V{" 123", "abc", "!!", "  "}));
  EXPECT_EQ(Pieces(k, ""), V{});
}

TEST(PreTokenizerTest, Llama3) {
  const auto k = PreTokenizerKind::kLlama3;
  EXPECT_EQ(Pieces(k, "  \r\n\r\n  z"), (V{"  \r\n\r\n", " ", " z"}));
  EXPECT_EQ(Pieces(k, "x'\xC5\xBFx"), (V{"x", "'\xC5\xBF", "x"}));  // 'ſ folds to 's
  EXPECT_EQ(Pieces(k, "IT'S 12345"), (V{"IT", "'S", " ", "123", "45"}));
  EXPECT_EQ(Pieces(k, "(foo) !!\n\nbar"), (V{"(foo", ")", " !!\n\n", "bar"}));
  EXPECT_EQ(Pieces(k, "\xC2\xA0\xC2\xA0x"), (V{"\xC2\xA0", "\xC2\xA0x"}));  // NBSP is \s
  EXPECT_EQ(Pieces(k,
                   "a\x1c\x1d"
                   "b"),
            (V{"a", "\x1c\x1d", "b"}));  // but not \x1c
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(Pieces(PreTokenizerKind::kQwen2, "x 123"), (V{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizerTest, SmolLm2IsolatesDigitsBeforeGpt2) {
  EXPECT_EQ(Pieces(PreTokenizerKind::kSmolLm2, "  456 ab1c"),
            (V{"  ", "4", "5", "6", " ab", "1", "c"}));
}

TEST(PreTokenizerTest, InvalidUtf8IsCoveredByteForByte) {
  const std::string text = "ab\xFF\xFE cd\xE2\x82";
  for (auto k : {PreTokenizerKind::kGpt2, PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2,
                 PreTokenizerKind::kSmolLm2, PreTokenizerKind::kKimiK2}) {
    std::string joined;
    for (const auto& p : Pieces(k, text)) joined += p;
    EXPECT_EQ(joined, text) << PreTokenizerName(k);
  }
}

PreTokenizerKind ScannerOf(std::string_view gguf_name) {
  auto stages = PreTokenizerStagesForGgufName(gguf_name);
  EXPECT_TRUE(stages.ok()) << gguf_name;
  if (!stages.ok() || stages->size() != 1 ||
      stages->front().type != PreTokenizerStage::Type::kScanner) {
    return PreTokenizerKind::kRegex;
  }
  return stages->front().scanner;
}

TEST(PreTokenizerTest, GgufNames) {
  EXPECT_EQ(ScannerOf("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(ScannerOf("glm4"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(ScannerOf("chatglm-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(ScannerOf("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(ScannerOf("smollm"), PreTokenizerKind::kSmolLm2);
  EXPECT_EQ(ScannerOf("gpt-2"), PreTokenizerKind::kGpt2);
  for (std::string_view regex_name : {"deepseek-v3", "deepseek-llm", "deepseek-coder", "kimi-k2",
                                      "gpt-4o", "qwen35", "falcon", "tekken"}) {
    auto stages = PreTokenizerStagesForGgufName(regex_name);
    ASSERT_TRUE(stages.ok()) << regex_name;
    ASSERT_FALSE(stages->empty());
    EXPECT_EQ(stages->front().type, PreTokenizerStage::Type::kSplit) << regex_name;
    auto built = PreTokenizerPipeline::Build(*stages);
    EXPECT_TRUE(built.ok()) << regex_name << ": " << built.status().message();
  }
  // Names llama.cpp splits with deepseek-v3's regexes (its converter writes
  // joyai-llm for DeepSeek-V3's own tokenizer.json): the same stages.
  auto deepseek = PreTokenizerStagesForGgufName("deepseek-v3");
  ASSERT_TRUE(deepseek.ok());
  for (std::string_view alias : {"joyai-llm", "hunyuan-dense"}) {
    auto stages = PreTokenizerStagesForGgufName(alias);
    ASSERT_TRUE(stages.ok()) << alias;
    ASSERT_EQ(stages->size(), deepseek->size()) << alias;
    for (size_t i = 0; i < stages->size(); ++i) {
      EXPECT_EQ((*stages)[i].pattern, (*deepseek)[i].pattern) << alias;
    }
  }
  auto bad = PreTokenizerStagesForGgufName("no-such-pre");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-pre"), std::string::npos);
  EXPECT_NE(bad.status().message().find("llama-bpe"), std::string::npos);
  EXPECT_NE(bad.status().message().find("deepseek-v3"), std::string::npos);
}

}  // namespace
}  // namespace anymoe
