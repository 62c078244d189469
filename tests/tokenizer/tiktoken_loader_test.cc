// The tiktoken-style folder loader (Kimi K2) on small files: the BPE it
// derives from ranks, the special tokens of the config, and a malformed
// tiktoken.model or pat_str refused with a named error. Identity with tiktoken
// on a real file is real_tokenizer_test.cc's RealTiktokenFolderTest.
#include <gtest/gtest.h>

#include "testing/test_files.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

class TiktokenLoaderTest : public testing::TempDirTest {
 protected:
  // Ranks 0..255: the single bytes, in order; then "ab", "abc" (base64).
  static std::string ByteRanks() {
    static const char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (int b = 0; b < 256; ++b) {
      out += kAlphabet[b >> 2];
      out += kAlphabet[(b & 3) << 4];
      out += "== " + std::to_string(b) + "\n";
    }
    return out + "YWI= 256\nYWJj 257\n";
  }
};

TEST_F(TiktokenLoaderTest, RanksBecomeBpeAndConfigTokensSpecials) {
  WriteText("tiktoken.model", ByteRanks());
  WriteText("tokenizer_config.json",
            R"({"added_tokens_decoder": {"258": {"content": "[BOS]", "special": true},
                "259": {"content": "<think>", "special": false}}, "bos_token": "[BOS]"})");
  auto tok = Tokenizer::FromTiktokenFolder(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->vocab_size(), 258 + 256);  // Kimi's 256 reserved special ids
  EXPECT_EQ((*tok)->Encode("abc", false, false), (std::vector<int32_t>{257}));
  EXPECT_EQ((*tok)->Encode("abd", false, false), (std::vector<int32_t>{256, 'd'}));
  EXPECT_EQ((*tok)->Encode("[BOS]x", false, true), (std::vector<int32_t>{258, 'x'}));
  EXPECT_EQ((*tok)->Encode("<think>", false, false), (std::vector<int32_t>{259}));
  EXPECT_EQ((*tok)->Encode("<|reserved_token_300|>", false, true), (std::vector<int32_t>{300}));
  EXPECT_EQ((*tok)->bos_id(), 258);
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("abc[BOS]", false, true)), "abc[BOS]");
}

TEST_F(TiktokenLoaderTest, MalformedModelIsRefusedWithANamedError) {
  const std::pair<const char*, std::string> bad[] = {
      {"not base64", "YW!= 0\n"},
      {"no rank", "YWI=\n"},
      {"rank not an integer", "YWI= x1\n"},
      {"negative rank", "YWI= -1\n"},
      {"repeated rank", "YQ== 0\nYg== 0\n"},
      {"missing rank", "YQ== 0\nYg== 2\n"},
      {"far rank", "YQ== 0\nYg== 99999999\n"},
      {"three fields", "YQ== 0 1\n"},
      {"empty token", "= 0\n"},
      {"empty file", ""},
  };
  for (const auto& [what, text] : bad) {
    SCOPED_TRACE(what);
    WriteText("tiktoken.model", text);
    auto tok = Tokenizer::FromTiktokenFolder(dir_.string());
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), "tiktoken_model_malformed") << tok.status().message();
    EXPECT_NE(tok.status().message().find("tiktoken.model"), std::string::npos);
  }
  std::filesystem::remove(Path("tiktoken.model"));
  EXPECT_EQ(Tokenizer::FromTiktokenFolder(dir_.string()).status().code(),
            "tiktoken_model_malformed");  // absent
}

TEST_F(TiktokenLoaderTest, BadPatternOrConfigIsRefused) {
  WriteText("tiktoken.model", ByteRanks());
  WriteText("tokenization_kimi.py", "pat_str = \"|\".join([r\"\"\"(a+)+$\"\"\"])\n");
  EXPECT_EQ(Tokenizer::FromTiktokenFolder(dir_.string()).status().code(),
            "tokenizer_regex_rejected");
  WriteText("tokenization_kimi.py", "class TikTokenTokenizer:\n    pass\n");
  EXPECT_EQ(Tokenizer::FromTiktokenFolder(dir_.string()).status().code(),
            "tokenizer_regex_rejected");
  std::filesystem::remove(Path("tokenization_kimi.py"));
  WriteText("tokenizer_config.json", R"({"added_tokens_decoder": {"5": {"content": "x"}}})");
  auto clash = Tokenizer::FromTiktokenFolder(dir_.string());
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("added_tokens_decoder"), std::string::npos);
}

}  // namespace
}  // namespace anymoe
