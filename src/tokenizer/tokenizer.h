// BPE tokenizer loaded from GGUF metadata or an HF tokenizer.json, producing the
// same ids as HF tokenizers: byte-level (GPT-2 family: SmolLM2, Llama-3, Qwen2,
// GLM-4.x) or SentencePiece-style (Llama-2, Mistral, Mixtral; sentencepiece_bpe.h). Encode accepts any bytes; Decode accepts any ids. A Tokenizer is
// immutable after loading and safe to use from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/pre_tokenizer_pipeline.h"
#include "tokenizer/token_table.h"

namespace anymoe {

class GgufFile;
struct TokenizerSpec;

// bos/eos/pad, add_bos_token and chat_template of an HF tokenizer_config.json,
// resolved against the spec's tokens (tokenizer_hf.cc; the tiktoken loader
// reads the same file).
Status ReadHfTokenizerConfig(const std::string& path, TokenizerSpec* spec);

// How a token id behaves.
enum class TokenKind : uint8_t {
  kNormal,   // produced by BPE
  kSpecial,  // control token: split out of text when parse_special, skippable on decode
  kAdded,    // user-defined added token: always split out of text, decoded as text
  kUnused,   // no text (gap in the id space or GGUF "unused")
};

// Limits on a vocabulary read from a file, checked by the loaders before
// they build anything from it: 4x the largest real vocabulary (262,144
// tokens), merges to match, and tokens far longer than any real one (real
// tokens are under 256 bytes). Each keeps the tables a hostile file can make
// in proportion to what the file holds (docs/reliability.md, "Memory").
inline constexpr int64_t kMaxVocabTokens = int64_t(1) << 20;
inline constexpr int64_t kMaxMerges = int64_t(1) << 21;
inline constexpr size_t kMaxTokenBytes = size_t(16) << 10;

// Everything a loader extracts from a model file; Tokenizer::Create validates it.
struct TokenizerSpec {
  std::string source;                    // file name, for error messages
  std::vector<std::string> token_texts;  // id -> text as stored (byte-level for BPE)
  std::vector<TokenKind> kinds;          // id -> kind, same size
  std::vector<int32_t> bpe_ids;          // ids of the BPE vocabulary (texts in token_texts)
  std::vector<BpeModel::Merge> merges;   // in rank order
  std::vector<AddedToken> added;         // split out before pre-tokenization
  PreTokenizerKind pre = PreTokenizerKind::kGpt2;  // kRegex: pre_stages
  std::vector<PreTokenizerStage> pre_stages;       // run in order when pre == kRegex
  bool nfc = false;                                // HF normalizer NFC (Qwen2)
  bool ignore_merges = false;                      // a piece found whole in the vocab is one token
  // Set: a SentencePiece BPE (texts with "▁", byte tokens <0xNN>; `pre` and
  // `nfc` unused). Unset: byte-level BPE.
  std::optional<SentencePieceOptions> sentencepiece;
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;  // Encode with add_bos also appends eos_id (GGUF add_eos_token)
  std::string chat_template;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* and tokenizer.chat_template. The "gpt2" (byte-level
  // BPE) and "llama" (SentencePiece BPE) models are supported; anything else is
  // an error naming the supported ones.
  static Expected<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);

  // Reads an HF tokenizer.json (BPE with byte-level pre-tokenizer and decoder, or
  // SentencePiece-style BPE with byte fallback and "▁" normalisation) and,
  // when the second path is non-empty, bos/eos/add_bos/chat_template from
  // tokenizer_config.json.
  static Expected<std::unique_ptr<Tokenizer>> FromHfJson(
      const std::string& tokenizer_json_path, const std::string& tokenizer_config_path_or_empty);

  // Reads a tiktoken-style HF folder (Kimi K2 / K2.5): `tiktoken.model` (base64
  // token + rank lines), the special tokens of tokenizer_config.json's
  // added_tokens_decoder (and bos/eos/pad, chat_template), and the split
  // pattern from tokenization_kimi.py's pat_str, or Kimi's own when the folder
  // has no such file. Errors: "tiktoken_model_malformed", "tokenizer_regex_rejected".
  static Expected<std::unique_ptr<Tokenizer>> FromTiktokenFolder(const std::string& dir);

  static Expected<std::unique_ptr<Tokenizer>> Create(TokenizerSpec spec);

  // Text -> ids. add_bos prepends bos_id() when the model has one (and appends
  // eos_id() when the model's add_eos is set). parse_special:
  // special tokens written in the text become their ids; when false their text is
  // encoded as ordinary text (as HF's encode_special_tokens does), so user text can
  // never inject control tokens. Added non-special tokens are always recognised.
  // A pre-tokenizer regex from the model file that hits its matching limits on
  // this text fails the call alone ("tokenizer_regex_limit", kInvalidArgument).
  Expected<std::vector<int32_t>> TryEncode(std::string_view text, bool add_bos,
                                           bool parse_special) const;
  Expected<std::vector<int32_t>> TryEncodeWithPlainRanges(
      std::string_view text, bool add_bos, std::span<const TextRange> plain_ranges) const;
  // As TryEncode; on a regex limit (never with the built-in scanners) the ids
  // are those encoded before it. Callers that answer requests use TryEncode.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Text -> ids with special tokens parsed everywhere except where they would
  // overlap `plain_ranges` (sorted, disjoint byte ranges): a rendered chat whose
  // messages must stay text. Text around the ranges is tokenized as in Encode,
  // so the ids equal Encode(text, add_bos, true) when no message holds a special.
  std::vector<int32_t> EncodeWithPlainRanges(std::string_view text, bool add_bos,
                                             std::span<const TextRange> plain_ranges) const;

  // Ids -> UTF-8 text. Invalid ids (negative, >= vocab_size(), or unused) decode to
  // U+FFFD; bytes that do not form valid UTF-8 also become U+FFFD, so the result is
  // always valid UTF-8. skip_special drops special tokens.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Raw bytes of one token (may be a partial UTF-8 sequence); empty for invalid ids.
  std::string_view TokenPiece(int32_t id) const;
  // The token's text as the vocabulary stores it ("▁Hello", "Ġworld"); empty
  // for invalid ids.
  std::string_view TokenText(int32_t id) const;

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  // Heap bytes of the vocabulary tables (texts, pieces, BPE vocabulary and merges).
  size_t table_bytes() const;
  int32_t bos_id() const { return spec_.bos_id; }  // -1 when none
  int32_t eos_id() const { return spec_.eos_id; }
  int32_t pad_id() const { return spec_.pad_id; }
  // eos, eot, eom and the model's end-of-turn special tokens (<|im_end|>, <|eot_id|>,
  // <|eom_id|>, <|endoftext|>, <|end_of_text|>, GLM's <|user|> / <|observation|>).
  std::vector<int32_t> stop_ids() const { return stop_ids_; }
  bool IsSpecial(int32_t id) const;
  TokenKind kind(int32_t id) const;
  const std::string& chat_template() const { return spec_.chat_template; }
  bool add_bos_default() const { return spec_.add_bos; }
  PreTokenizerKind pre_tokenizer() const { return spec_.pre; }
  bool is_sentencepiece() const { return spm_.has_value(); }

  // Id of a token by its stored text, or -1.
  int32_t FindToken(std::string_view text) const;

 private:
  Tokenizer() = default;
  Status EncodeSplit(std::string_view text, bool add_bos, bool parse_special,
                     std::span<const TextRange> plain_ranges, std::vector<int32_t>* ids) const;
  Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const;
  void CollectStopIds();

  TokenizerSpec spec_;  // its token texts and vocabulary moved into the tables below
  TokenTable texts_;    // id -> text as stored, indexed (FindToken)
  TokenTable pieces_;   // id -> raw bytes
  BpeModel bpe_;
  std::optional<SentencePieceBpe> spm_;  // instead of bpe_ for a SentencePiece model
  PreTokenizerPipeline pre_;
  AddedTokenMatcher added_;
  std::vector<int32_t> stop_ids_;
};

}  // namespace anymoe
