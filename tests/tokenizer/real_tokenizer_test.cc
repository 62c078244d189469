// Identity with the references on real tokenizer files of the family (issue
// 47): for each file tools/fetch_real_tokenizers.py fetches (too big to
// commit; checked by sha256 there), every string of corpus_large.json and text
// around each of the file's added tokens gives the ids HF tokenizers gives
// (tools/gen_real_tokenizer_golden.py), with special tokens parsed and as
// text, and decodes back to the text. Skipped, naming the script, when the
// files are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "golden_util.h"
#include "testing/test_files.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

std::string RealDir(const std::string& name) {
  return std::string(ANYMOE_MODELS_DIR) + "/real-tokenizers/" + name;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids, ids_as_text;
};

std::vector<Case> Cases(const Json& golden) {
  const Json corpus = testing::LoadGoldenJson("corpus_large.json")["cases"];
  std::vector<Case> out;
  const Json& cases = golden["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    const Json& c = cases[i];
    Case k;
    k.text = c.contains("t") ? c["t"].get<std::string>() : corpus[i]["text"].get<std::string>();
    k.ids = c["i"].get<std::vector<int32_t>>();
    k.ids_as_text = c.contains("n") ? c["n"].get<std::vector<int32_t>>() : k.ids;
    out.push_back(std::move(k));
  }
  return out;
}

// Compares every case; returns the number that differ (the first few are printed).
int CompareCases(const Tokenizer& tok, const std::vector<Case>& cases, const std::string& name,
                 const std::vector<int32_t>& bos) {
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto ids = tok.TryEncode(c.text, false, /*parse_special=*/true);
    auto as_text = tok.TryEncode(c.text, false, /*parse_special=*/false);
    auto with_bos = tok.TryEncode(c.text, tok.add_bos_default(), true);
    bool ok = ids.ok() && as_text.ok() && with_bos.ok();
    ok = ok && *ids == c.ids && *as_text == c.ids_as_text;
    if (ok) {
      std::vector<int32_t> want = bos;
      want.insert(want.end(), c.ids.begin(), c.ids.end());
      ok = *with_bos == want;
    }
    // Byte-level vocabularies without a normalizer: decoding gives the text back.
    ok = ok && tok.Decode(*ids) == c.text && tok.Decode(*as_text) == c.text;
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << name << " case " << i << " \"" << testing::Printable(c.text)
                    << "\"\n  ours: " << (ids.ok() ? Json(*ids).dump() : ids.status().message())
                    << "\n  ref:  " << Json(c.ids).dump() << "\n  ours(as text): "
                    << (as_text.ok() ? Json(*as_text).dump() : as_text.status().message())
                    << "\n  ref(as text):  " << Json(c.ids_as_text).dump()
                    << "\n  ours(bos): " << (with_bos.ok() ? Json(*with_bos).dump() : "")
                    << " (reference adds " << Json(bos).dump()
                    << ")\n  decoded: " << testing::Printable(ids.ok() ? tok.Decode(*ids) : "");
    }
  }
  std::printf("%s: %zu of %zu cases identical to the reference\n", name.c_str(),
              cases.size() - size_t(failures), cases.size());
  return failures;
}

class RealHfTokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealHfTokenizerTest, IdsAndDecodeMatchHfTokenizers) {
  const std::string dir = RealDir(GetParam());
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    GTEST_SKIP() << dir << "/tokenizer.json is absent: run "
                 << "/work/venv-ref/bin/python tools/fetch_real_tokenizers.py";
  }
  const std::string config = dir + "/tokenizer_config.json";
  auto tok = Tokenizer::FromHfJson(dir + "/tokenizer.json",
                                   std::filesystem::exists(config) ? config : "");
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Json golden = testing::LoadGoldenJson("real/" + GetParam() + ".golden.json");
  const std::vector<Case> cases = Cases(golden);
  ASSERT_GE(cases.size(), 2000u);
  std::vector<int32_t> bos = golden["bos"].get<std::vector<int32_t>>();
  EXPECT_EQ(CompareCases(**tok, cases, GetParam(), bos), 0);
  // Bytes HF cannot take (invalid UTF-8): encoded without error, and, where the
  // vocabulary has every byte (HF drops a byte it lacks, and so do we), decoded
  // as the text with each ill-formed subpart replaced by U+FFFD.
  bool every_byte = true;
  for (int b = 0; b < 256; ++b)
    every_byte &= !(*tok)->Encode(std::string(1, char(b)), false, false).empty();
  for (std::string_view bytes :
       {std::string_view("a\xFF b"), std::string_view("\xC3"), std::string_view("\xE4\xB8 x"),
        std::string_view("\xED\xA0\x80 surrogate"), std::string_view("1\xF0\x9F\x98 2"),
        std::string_view("\x80\x80<\xEF\xBD\x9C")}) {
    auto ids = (*tok)->TryEncode(bytes, false, true);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    if (every_byte) {
      EXPECT_EQ((*tok)->Decode(*ids), ToValidUtf8(bytes)) << testing::Printable(std::string(bytes));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, RealHfTokenizerTest,
                         ::testing::Values("deepseek-v3", "deepseek-llm", "llama3"), [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Kimi K2's folder layout (tiktoken.model, tokenizer_config.json with Kimi's
// added_tokens_decoder, tokenization_kimi.py's pat_str) around a real
// tiktoken.model (Qwen's qwen.tiktoken: Kimi's own file has no public copy
// here), against tiktoken with Kimi's pattern and special tokens. Once with
// tokenization_kimi.py and once without (the built-in kimi-k2 pattern).
class RealTiktokenFolderTest : public testing::TempDirTest {};

TEST_F(RealTiktokenFolderTest, IdsAndDecodeMatchTiktoken) {
  const std::string model = RealDir("qwen-tiktoken") + "/tiktoken.model";
  if (!std::filesystem::exists(model)) {
    GTEST_SKIP() << model << " is absent: run "
                 << "/work/venv-ref/bin/python tools/fetch_real_tokenizers.py";
  }
  const Json golden = testing::LoadGoldenJson("real/qwen-tiktoken.golden.json");
  const int32_t base = golden["base_vocab"].get<int32_t>();
  Json config = {{"bos_token", "[BOS]"},
                 {"eos_token", "[EOS]"},
                 {"pad_token", "[PAD]"},
                 {"tokenizer_class", "TikTokenTokenizer"}};
  for (const auto& [offset, t] : golden["added"].items()) {
    config["added_tokens_decoder"][std::to_string(base + std::stoi(offset))] = {
        {"content", t["content"]}, {"special", t["special"]}, {"lstrip", false},
        {"rstrip", false},         {"normalized", false},     {"single_word", false}};
  }
  std::filesystem::copy_file(model, Path("tiktoken.model"));
  WriteText("tokenizer_config.json", config.dump());
  std::string code =
      "class TikTokenTokenizer:\n    num_reserved_special_tokens = 256\n\n"
      "    pat_str = \"|\".join(\n        [\n";
  for (const Json& part : golden["pattern_parts"]) {
    code += "            r\"\"\"" + part.get<std::string>() + "\"\"\",\n";
  }
  code += "        ]\n    )\n";
  const std::vector<Case> cases = Cases(golden);
  ASSERT_GE(cases.size(), 2000u);
  for (bool with_code : {true, false}) {
    SCOPED_TRACE(with_code ? "tokenization_kimi.py" : "built-in kimi-k2 pattern");
    if (with_code) {
      WriteText("tokenization_kimi.py", code);
    } else {
      std::filesystem::remove(Path("tokenization_kimi.py"));
    }
    auto tok = Tokenizer::FromTiktokenFolder(dir_.string());
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    EXPECT_EQ((*tok)->vocab_size(), base + 256);
    EXPECT_EQ((*tok)->bos_id(), base);
    EXPECT_EQ((*tok)->eos_id(), base + 1);
    EXPECT_FALSE((*tok)->add_bos_default());
    EXPECT_EQ((*tok)->kind((*tok)->FindToken("<|tool_call_begin|>")), TokenKind::kAdded);
    EXPECT_EQ((*tok)->kind(base + 100), TokenKind::kSpecial);  // <|reserved_token_ID|>
    EXPECT_EQ(CompareCases(**tok, cases, with_code ? "kimi folder" : "kimi folder (built-in)", {}),
              0);
  }
}

// A tiktoken folder around Llama-3's own tiktoken ranks (tokenizer.model, the
// file its tokenizer.json was made from), its Split pattern as pat_str and its
// 256 special tokens in tokenizer_config.json: the same ids as HF tokenizers
// on the tokenizer.json (the generator checked tiktoken agrees on every case).
TEST_F(RealTiktokenFolderTest, Llama3RanksGiveTheTokenizerJsonIds) {
  const std::string model = RealDir("llama3") + "/tokenizer.model";
  if (!std::filesystem::exists(model)) {
    GTEST_SKIP() << model << " is absent: run "
                 << "/work/venv-ref/bin/python tools/fetch_real_tokenizers.py";
  }
  const Json golden = testing::LoadGoldenJson("real/llama3.golden.json");
  const Json& folder = golden["tiktoken"];
  const int32_t base = folder["base_vocab"].get<int32_t>();
  Json config = {{"tokenizer_class", "TikTokenTokenizer"}};
  for (const auto& [id, t] : folder["added"].items()) {
    config["added_tokens_decoder"][id] = {{"content", t["content"]}, {"special", t["special"]}};
  }
  std::filesystem::copy_file(model, Path("tiktoken.model"));
  WriteText("tokenizer_config.json", config.dump());
  WriteText("tokenization_kimi.py", "num_reserved_special_tokens = 0\npat_str = \"|\".join([r\"\"\"" +
                                        folder["pattern"].get<std::string>() + "\"\"\"])\n");
  auto tok = Tokenizer::FromTiktokenFolder(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->vocab_size(), base + int32_t(folder["added"].size()));
  EXPECT_EQ((*tok)->FindToken("<|eot_id|>"), 128009);
  const std::vector<Case> cases = Cases(golden);
  ASSERT_GE(cases.size(), 2000u);
  EXPECT_EQ(CompareCases(**tok, cases, "llama3 tiktoken folder", {}), 0);
}

// gpt-oss's vocabulary: OpenAI's o200k_base.tiktoken ranks (the fetch script
// checks tiktoken's own pinned hash) in a tiktoken folder with o200k's pattern
// as pat_str and o200k_harmony's 1,090 special tokens in tokenizer_config.json,
// against tiktoken's o200k_harmony encoding: o200k's pattern (the `gpt-4o` /
// `llama4` GGUF name) through the generic regex pre-tokenizer.
TEST_F(RealTiktokenFolderTest, O200kHarmonyMatchesTiktoken) {
  const std::string model = RealDir("o200k") + "/tiktoken.model";
  if (!std::filesystem::exists(model)) {
    GTEST_SKIP() << model << " is absent: run "
                 << "/work/venv-ref/bin/python tools/fetch_real_tokenizers.py o200k";
  }
  const Json golden = testing::LoadGoldenJson("real/o200k.golden.json");
  const int32_t base = golden["base_vocab"].get<int32_t>();
  Json config = {{"bos_token", "<|startoftext|>"},
                 {"eos_token", "<|return|>"},
                 {"pad_token", "<|endoftext|>"},
                 {"tokenizer_class", "TikTokenTokenizer"}};
  for (const auto& [id, t] : golden["added"].items()) {
    config["added_tokens_decoder"][id] = {{"content", t["content"]}, {"special", t["special"]}};
  }
  std::filesystem::copy_file(model, Path("tiktoken.model"));
  WriteText("tokenizer_config.json", config.dump());
  WriteText("tokenization_kimi.py",
            "num_reserved_special_tokens = " + std::to_string(golden["added"].size()) +
                "\npat_str = \"|\".join([r\"\"\"" + golden["pattern"].get<std::string>() +
                "\"\"\"])\n");
  auto tok = Tokenizer::FromTiktokenFolder(dir_.string());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(base, 199998);
  EXPECT_EQ((*tok)->vocab_size(), 201088);
  EXPECT_EQ((*tok)->FindToken("<|channel|>"), 200005);
  EXPECT_EQ((*tok)->FindToken("<|endofprompt|>"), 200018);
  EXPECT_EQ((*tok)->bos_id(), 199998);
  EXPECT_FALSE((*tok)->add_bos_default());
  const std::vector<Case> cases = Cases(golden);
  ASSERT_GE(cases.size(), 2000u);
  EXPECT_EQ(CompareCases(**tok, cases, "o200k_harmony tiktoken folder", {}), 0);
}

}  // namespace
}  // namespace anymoe
