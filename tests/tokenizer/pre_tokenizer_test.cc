// Spot checks of the scanners on cases where the regex alternatives interact (the
// expected pieces are what HF tokenizers' Split / ByteLevel produce), and the
// GGUF pre-tokenizer name table.
#include "tokenizer/pre_tokenizer.h"

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
                 PreTokenizerKind::kSmolLm2}) {
    std::string joined;
    for (const auto& p : Pieces(k, text)) joined += p;
    EXPECT_EQ(joined, text) << PreTokenizerName(k);
  }
}

TEST(PreTokenizerTest, GgufNames) {
  EXPECT_EQ(*PreTokenizerFromGgufName("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerFromGgufName("glm4"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerFromGgufName("chatglm-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerFromGgufName("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*PreTokenizerFromGgufName("smollm"), PreTokenizerKind::kSmolLm2);
  EXPECT_EQ(*PreTokenizerFromGgufName("gpt-2"), PreTokenizerKind::kGpt2);
  auto bad = PreTokenizerFromGgufName("tekken");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tekken"), std::string::npos);
  EXPECT_NE(bad.status().message().find("llama-bpe"), std::string::npos);
  EXPECT_NE(bad.status().message().find("smollm"), std::string::npos);
}

}  // namespace
}  // namespace anymoe
