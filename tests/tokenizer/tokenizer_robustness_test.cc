// Hostile and extreme input: megabyte single-class runs (the std::regex stack
// overflow class), random bytes, invalid ids, streaming that must never split a
// character, and malformed tokenizer files that must fail with a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "formats/gguf.h"
#include "golden_util.h"
#include "tokenizer/token_stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

const char* const kReferences[] = {"smollm2_small", "llama3", "qwen2", "glm4"};

std::unique_ptr<Tokenizer> Load(const std::string& name) {
  auto tok = Tokenizer::FromHfJson(testing::GoldenPath(name + ".tokenizer.json"), "");
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

bool IsValidUtf8(const std::string& s) { return ToValidUtf8(s) == s; }

TEST(TokenizerRobustnessTest, HugeSingleClassRunsAreLinearAndExact) {
  const std::vector<std::string> inputs = {
      std::string(1 << 20, 'a'),  std::string(1 << 20, ' '), std::string(100000, '7'),
      std::string(1 << 20, '\n'), std::string(1 << 20, '!'), std::string(1 << 19, '\xC3'),
  };
  for (const char* name : kReferences) {
    auto tok = Load(name);
    ASSERT_NE(tok, nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto ids = tok->Encode(inputs[i], false, true);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(seconds, 30.0) << name << " input " << i;
      EXPECT_FALSE(ids.empty()) << name << " input " << i;
      if (i < 5) {  // the last input is invalid UTF-8 and decodes to U+FFFD
        EXPECT_EQ(tok->Decode(ids), inputs[i]) << name << " input " << i;
      }
    }
  }
}

std::string RandomBytes(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> kFragments = {"<|im_start|>",
                                                      "<|im_end|>",
                                                      "<|",
                                                      "|>",
                                                      "[gMASK]",
                                                      "<think>",
                                                      "'s",
                                                      "'LL",
                                                      " ",
                                                      "\n",
                                                      "\r\n",
                                                      "\t",
                                                      "123",
                                                      "\xF0\x9F\x98\x80",
                                                      "\xE4\xBD\xA0",
                                                      "\xC3\xA9",
                                                      "e\xCC\x81",
                                                      "\xE2\x80\x8D"};
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255), pick(0, 9);
  std::uniform_int_distribution<size_t> frag(0, kFragments.size() - 1);
  std::string s;
  const size_t n = len(rng);
  while (s.size() < n) {
    if (pick(rng) < 3) {
      s += kFragments[frag(rng)];
    } else {
      s.push_back(static_cast<char>(byte(rng)));
    }
  }
  return s;
}

TEST(TokenizerRobustnessTest, RandomBytesNeverCrashAndDecodeIsValidUtf8) {
  std::mt19937 rng(1234);
  std::vector<std::unique_ptr<Tokenizer>> toks;
  for (const char* name : kReferences) toks.push_back(Load(name));
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string text = RandomBytes(rng, 200);
    for (const auto& tok : toks) {
      for (bool parse_special : {true, false}) {
        const auto ids = tok->Encode(text, /*add_bos=*/false, parse_special);
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
        const auto with_bos = tok->Encode(text, /*add_bos=*/true, parse_special);
        ASSERT_EQ(with_bos.size(), ids.size() + (tok->bos_id() >= 0 ? 1 : 0));
        const std::string decoded = tok->Decode(ids);
        ASSERT_TRUE(IsValidUtf8(decoded));
        // Byte-level BPE loses nothing when every byte has a token (Llama-3, GLM).
        if (IsValidUtf8(text) && tok->pre_tokenizer() == PreTokenizerKind::kLlama3) {
          ASSERT_EQ(decoded, text) << testing::Printable(text);
        }
      }
    }
  }
}

TEST(TokenizerRobustnessTest, InvalidIdsDecodeToReplacementCharacter) {
  auto tok = Load("llama3");
  ASSERT_NE(tok, nullptr);
  const int32_t a = tok->Encode("a", false, false).at(0);
  const std::vector<int32_t> ids = {a, -1, tok->vocab_size(), 1 << 30, a};
  EXPECT_EQ(tok->Decode(ids),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(tok->TokenPiece(-5), "");
  EXPECT_EQ(tok->TokenPiece(tok->vocab_size()), "");
  EXPECT_FALSE(tok->IsSpecial(-1));
  EXPECT_EQ(tok->kind(1 << 30), TokenKind::kUnused);
}

// Feeds ids one at a time; every chunk must be valid UTF-8 and together they must
// equal Decode of the whole sequence.
void ExpectStreamMatchesDecode(const Tokenizer& tok, const std::vector<int32_t>& ids,
                               bool skip_special) {
  TokenStreamDecoder stream(tok, skip_special);
  std::string joined;
  for (int32_t id : ids) {
    const std::string chunk = stream.Push(id);
    ASSERT_TRUE(IsValidUtf8(chunk)) << testing::Printable(chunk);
    ASSERT_LE(stream.pending_bytes(), 3u);
    joined += chunk;
  }
  const std::string tail = stream.Flush();
  ASSERT_TRUE(IsValidUtf8(tail));
  joined += tail;
  EXPECT_EQ(joined, tok.Decode(ids, skip_special));
}

TEST(TokenStreamDecoderTest, NeverEmitsSplitUtf8) {
  auto tok = Load("llama3");
  ASSERT_NE(tok, nullptr);
  // Multibyte characters rarely seen in training come out as several byte tokens.
  const std::string text =
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xE9\xBE\x98\xE9\xBE\x98 "
      "\xF0\x9D\x94\x98 caf\xC3\xA9 <|eot_id|> \xE4\xBD\xA0\xE5\xA5\xBD";
  const auto ids = tok->Encode(text, false, true);
  bool saw_partial = false;
  for (int32_t id : ids) saw_partial |= !IsValidUtf8(std::string(tok->TokenPiece(id)));
  EXPECT_TRUE(saw_partial) << "test text should contain byte-fallback tokens";
  ExpectStreamMatchesDecode(*tok, ids, false);
  ExpectStreamMatchesDecode(*tok, ids, true);

  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> any_id(-3, tok->vocab_size() + 3);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<int32_t> random_ids(40);
    for (auto& id : random_ids) id = any_id(rng);
    ExpectStreamMatchesDecode(*tok, random_ids, iter % 2 == 0);
  }
}

TEST(TokenStreamDecoderTest, HoldsBackUntilCharacterCompletes) {
  auto tok = Load("llama3");
  ASSERT_NE(tok, nullptr);
  // Find the single-byte tokens of U+1F600 (F0 9F 98 80).
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string("\xF0\x9F\x98\x80")) {
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      if (tok->TokenPiece(id) == std::string(1, static_cast<char>(b))) {
        bytes.push_back(id);
        break;
      }
    }
  }
  ASSERT_EQ(bytes.size(), 4u);
  TokenStreamDecoder stream(*tok);
  EXPECT_EQ(stream.Push(bytes[0]), "");
  EXPECT_EQ(stream.Push(bytes[1]), "");
  EXPECT_EQ(stream.Push(bytes[2]), "");
  EXPECT_EQ(stream.Push(bytes[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.Push(bytes[0]), "");
  EXPECT_EQ(stream.Flush(), "\xEF\xBF\xBD");  // unfinished at the end of the stream
}

// --- malformed files --------------------------------------------------------

std::string TempFile(const std::string& name, const std::string& contents) {
  const auto path = std::filesystem::temp_directory_path() / ("anymoe_tok_test_" + name);
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

std::string JsonError(const std::string& json) {
  auto tok = Tokenizer::FromHfJson(TempFile("bad.json", json), "");
  return tok.ok() ? "" : tok.status().message();
}

TEST(TokenizerLoadErrorTest, TokenizerJsonErrorsNameTheProblem) {
  EXPECT_NE(JsonError("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(JsonError(R"({"model": {"type": "Unigram", "vocab": []}})").find("supported: BPE"),
            std::string::npos);
  const std::string bad_pre =
      JsonError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                    "pre_tokenizer": {"type": "Whitespace"}})");
  EXPECT_NE(bad_pre.find("unsupported pre_tokenizer"), std::string::npos) << bad_pre;
  EXPECT_NE(bad_pre.find("supported"), std::string::npos);
  EXPECT_NE(JsonError(R"({"model": {"type": "BPE", "vocab": {"a": 99999999}},
                          "pre_tokenizer": {"type": "ByteLevel"}})")
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(JsonError(R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})").find("integer"),
            std::string::npos);
  EXPECT_FALSE(Tokenizer::FromHfJson("/nonexistent/tokenizer.json", "").ok());
}

// Minimal GGUF v3 writer for string / u32 / string-array metadata.
class GgufBuilder {
 public:
  void String(const std::string& key, const std::string& value) {
    Key(key, 8);
    Str(value);
    ++count_;
  }
  void U32(const std::string& key, uint32_t value) {
    Key(key, 4);
    Raw(value);
    ++count_;
  }
  void StringArray(const std::string& key, const std::vector<std::string>& values) {
    Key(key, 9);
    Raw(uint32_t{8});
    Raw(uint64_t{values.size()});
    for (const auto& v : values) Str(v);
    ++count_;
  }
  std::string Bytes() const {
    std::string out = "GGUF";
    auto raw = [&out](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    raw(uint32_t{3});
    raw(uint64_t{0});
    raw(count_);
    return out + kv_;
  }

 private:
  template <typename T>
  void Raw(T v) {
    kv_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void Str(const std::string& s) {
    Raw(uint64_t{s.size()});
    kv_ += s;
  }
  void Key(const std::string& key, uint32_t type) {
    Str(key);
    Raw(type);
  }
  std::string kv_;
  uint64_t count_ = 0;
};

std::string GgufError(const GgufBuilder& b) {
  auto gguf = GgufFile::Open(TempFile("bad.gguf", b.Bytes()));
  if (!gguf.ok()) return "open: " + gguf.status().message();
  auto tok = Tokenizer::FromGguf(**gguf);
  return tok.ok() ? "" : tok.status().message();
}

TEST(TokenizerLoadErrorTest, GgufErrorsNameTheProblem) {
  GgufBuilder wordpiece;
  wordpiece.String("tokenizer.ggml.model", "bert");
  const std::string model_error = GgufError(wordpiece);
  EXPECT_NE(model_error.find("'bert' is not supported; supported: gpt2"), std::string::npos)
      << model_error;
  EXPECT_NE(model_error.find("llama (SentencePiece BPE)"), std::string::npos) << model_error;

  // A SentencePiece vocabulary without its scores.
  GgufBuilder spm;
  spm.String("tokenizer.ggml.model", "llama");
  spm.StringArray("tokenizer.ggml.tokens", {"<unk>", "a"});
  const std::string spm_error = GgufError(spm);
  EXPECT_NE(spm_error.find("tokenizer.ggml.scores"), std::string::npos) << spm_error;

  GgufBuilder pre;
  pre.String("tokenizer.ggml.model", "gpt2");
  pre.String("tokenizer.ggml.pre", "jais-mystery");
  const std::string pre_error = GgufError(pre);
  EXPECT_NE(pre_error.find("jais-mystery"), std::string::npos) << pre_error;
  EXPECT_NE(pre_error.find("known: "), std::string::npos) << pre_error;

  GgufBuilder bos;
  bos.String("tokenizer.ggml.model", "gpt2");
  bos.String("tokenizer.ggml.pre", "gpt-2");
  bos.StringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  bos.StringArray("tokenizer.ggml.merges", {"a b"});
  bos.U32("tokenizer.ggml.bos_token_id", 7);
  const std::string bos_error = GgufError(bos);
  EXPECT_NE(bos_error.find("bos id 7 is outside the vocabulary"), std::string::npos) << bos_error;

  GgufBuilder merges;
  merges.String("tokenizer.ggml.model", "gpt2");
  merges.StringArray("tokenizer.ggml.tokens", {"a", "b"});
  merges.StringArray("tokenizer.ggml.merges", {"ab"});
  EXPECT_NE(GgufError(merges).find("merges[0]"), std::string::npos) << GgufError(merges);

  GgufBuilder ok;
  ok.String("tokenizer.ggml.model", "gpt2");
  ok.StringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<|end|>"});
  ok.StringArray("tokenizer.ggml.merges", {"a b"});
  EXPECT_EQ(GgufError(ok), "");

  // A merge naming tokens the vocabulary lacks is refused, as HF tokenizers
  // refuses it (issue 20; it used to be skipped silently).
  GgufBuilder unknown;
  unknown.String("tokenizer.ggml.model", "gpt2");
  unknown.StringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<|end|>"});
  unknown.StringArray("tokenizer.ggml.merges", {"a b", "zz q"});
  EXPECT_NE(GgufError(unknown).find("merge 1 names 'zz', which is not in the vocabulary"),
            std::string::npos)
      << GgufError(unknown);
}

}  // namespace
}  // namespace anymoe
