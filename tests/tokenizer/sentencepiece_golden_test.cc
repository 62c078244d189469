// Golden test of the SentencePiece-style BPE on the real Mixtral-8x7B /
// Mistral-7B v0.1 tokenizer (tools/gen_sentencepiece_golden.py): for every
// string of the shared corpus, ids with and without special-token parsing and
// decoded text equal HF tokenizers' for the current tokenizer.json (Metaspace)
// and the legacy one (Prepend + Replace normalizers), and the vocabulary-only
// GGUF written from tokenizer.model the way llama.cpp's converter lays it out
// gives the same ids as the legacy pipeline (llama.cpp's add_space_prefix).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "formats/gguf.h"
#include "golden_util.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

std::vector<std::string> CorpusTexts() {
  std::vector<std::string> texts;
  const Json corpus = testing::LoadGoldenJson("corpus_large.json");
  for (const Json& c : corpus["cases"]) {
    texts.push_back(c["text"].get<std::string>());
  }
  return texts;
}

const Json& Golden() {
  static const Json golden = testing::LoadGoldenJson("mixtral.golden.json");
  return golden;
}

std::vector<int32_t> Ids(const Json& c, const char* key, const char* fallback) {
  return (c.contains(key) ? c[key] : c[fallback]).get<std::vector<int32_t>>();
}

std::unique_ptr<Tokenizer> LoadJson(const std::string& json_path) {
  auto tok = Tokenizer::FromHfJson(json_path, testing::GoldenPath("mixtral.tokenizer_config.json"));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// The legacy tokenizer.json: the real file with the normalizer it had before
// (the generator checks that nothing else differs).
std::string WriteLegacyJson() {
  std::ifstream in(testing::GoldenPath("mixtral.tokenizer.json"), std::ios::binary);
  Json root = Json::parse(in);
  root["normalizer"] = Golden()["legacy_normalizer"];
  root["pre_tokenizer"] = nullptr;
  const std::string path =
      (std::filesystem::temp_directory_path() / "anymoe_mixtral_legacy.tokenizer.json").string();
  std::ofstream(path, std::ios::binary) << root.dump();
  return path;
}

enum class Flavor { kCurrent, kLegacy };

// Returns the number of failing strings; reports the first few.
int Compare(const Tokenizer& tok, Flavor flavor, bool check_decode, const std::string& what) {
  const std::vector<std::string> texts = CorpusTexts();
  const Json& cases = Golden()["cases"];
  EXPECT_EQ(cases.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size() && i < cases.size(); ++i) {
    const Json& c = cases[i];
    const std::string& text = texts[i];
    const bool legacy = flavor == Flavor::kLegacy;
    // Each key is written only where it differs from the one it falls back to.
    const std::vector<int32_t> want = Ids(c, legacy ? "legacy" : "ids", "ids");
    const std::vector<int32_t> want_text =
        c.contains(legacy ? "legacy_no_special" : "ids_no_special")
            ? c[legacy ? "legacy_no_special" : "ids_no_special"].get<std::vector<int32_t>>()
            : want;
    const auto ids = tok.Encode(text, /*add_bos=*/false, /*parse_special=*/true);
    const auto ids_text = tok.Encode(text, false, /*parse_special=*/false);
    bool ok = ids == want && ids_text == want_text;
    if (check_decode) {
      const std::string decoded = c.value("decoded", text);
      ok &= tok.Decode(ids) == decoded;
      ok &= tok.Decode(ids, /*skip_special=*/true) == c.value("skip", decoded);
    }
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << what << " string " << i << " \"" << testing::Printable(text)
                    << "\"\n  ours: " << Json(ids).dump() << "\n  HF:   " << Json(want).dump()
                    << "\n  ours (specials as text): " << Json(ids_text).dump()
                    << "\n  HF (specials as text):   " << Json(want_text).dump()
                    << "\n  decoded: \"" << testing::Printable(tok.Decode(ids)) << "\"";
    }
  }
  return failures;
}

TEST(SentencePieceGoldenTest, MetaspaceTokenizerJsonMatchesHfTokenizers) {
  auto tok = LoadJson(testing::GoldenPath("mixtral.tokenizer.json"));
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->is_sentencepiece());
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(Compare(*tok, Flavor::kCurrent, /*check_decode=*/true, "tokenizer.json"), 0);
}

TEST(SentencePieceGoldenTest, LegacyNormalizerTokenizerJsonMatchesHfTokenizers) {
  auto tok = LoadJson(WriteLegacyJson());
  ASSERT_NE(tok, nullptr);
  // Decoding is the same file's decoder; the golden's decoded text is the
  // current pipeline's, so only ids are compared here.
  EXPECT_EQ(Compare(*tok, Flavor::kLegacy, /*check_decode=*/false, "legacy tokenizer.json"), 0);
  // The legacy pipeline prefixes every segment, also one starting with a space.
  EXPECT_EQ(tok->Encode(" Hi", false, true).size(), tok->Encode("Hi", false, true).size() + 1);
}

std::unique_ptr<Tokenizer> LoadGguf() {
  auto gguf = GgufFile::Open(testing::GoldenPath("mixtral.vocab.gguf"));
  EXPECT_TRUE(gguf.ok()) << gguf.status().message();
  if (!gguf.ok()) return nullptr;
  EXPECT_TRUE((*gguf)->tensors().empty());
  auto tok = Tokenizer::FromGguf(**gguf);
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SentencePieceGoldenTest, VocabOnlyGgufScoresGiveTheLegacyPipelinesIds) {
  auto tok = LoadGguf();
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->is_sentencepiece());
  EXPECT_EQ(Compare(*tok, Flavor::kLegacy, /*check_decode=*/false, "mixtral.vocab.gguf"), 0);
}

TEST(SentencePieceGoldenTest, SpecialsBosAndTemplateComeFromTheFiles) {
  auto json = LoadJson(testing::GoldenPath("mixtral.tokenizer.json"));
  auto gguf = LoadGguf();
  ASSERT_NE(json, nullptr);
  ASSERT_NE(gguf, nullptr);
  for (const Tokenizer* tok : {json.get(), gguf.get()}) {
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_TRUE(tok->add_bos_default());
    EXPECT_TRUE(tok->IsSpecial(0) && tok->IsSpecial(1) && tok->IsSpecial(2));
    EXPECT_NE(tok->chat_template().find("[INST]"), std::string::npos);
    EXPECT_EQ(tok->stop_ids(), std::vector<int32_t>{2});
    const auto ids = tok->Encode("Hello", /*add_bos=*/true, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(tok->TokenPiece(13), "\n");  // <0x0A>
    EXPECT_EQ(tok->Decode(ids), "<s> Hello");
    EXPECT_EQ(tok->Decode(ids, /*skip_special=*/true), "Hello");
  }
}

TEST(SentencePieceGoldenTest, BytesThatAreNotUtf8FallBackToByteTokens) {
  auto tok = LoadJson(testing::GoldenPath("mixtral.tokenizer.json"));
  ASSERT_NE(tok, nullptr);
  const std::string text = "a\xFF\xC3z\xE4\xB8";  // stray, truncated and cut sequences
  const auto ids = tok->Encode(text, false, true);
  std::string bytes;
  for (const int32_t id : ids) bytes += tok->TokenPiece(id);
  EXPECT_EQ(bytes, " " + text);  // every byte kept, after the "▁" prefix
}

TEST(SentencePieceLoaderTest, UnsupportedPipelineIsANamedError) {
  std::ifstream in(testing::GoldenPath("mixtral.tokenizer.json"), std::ios::binary);
  Json root = Json::parse(in);
  root["normalizer"] = Json::parse(R"({"type": "NFKC"})");
  const std::string path =
      (std::filesystem::temp_directory_path() / "anymoe_spm_nfkc.tokenizer.json").string();
  std::ofstream(path, std::ios::binary) << root.dump();
  auto tok = Tokenizer::FromHfJson(path, "");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("unsupported normalizer"), std::string::npos)
      << tok.status().message();
  root["normalizer"] = nullptr;
  root["model"]["unk_token"] = "<nope>";
  std::ofstream(path, std::ios::binary) << root.dump();
  tok = Tokenizer::FromHfJson(path, "");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("unk_token"), std::string::npos) << tok.status().message();
}

}  // namespace
}  // namespace anymoe
