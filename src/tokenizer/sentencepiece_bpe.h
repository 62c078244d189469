// SentencePiece-style BPE (Llama-2, Mistral, Mixtral): text is normalised to
// the "▁" space marker, split into characters, characters without a token
// fall back to <0xNN> byte tokens (or the unknown token), and adjacent
// symbols merge in merge-rank order (HF tokenizer.json: BPE with
// byte_fallback) or in score order (GGUF tokenizer.ggml.model = llama:
// llama.cpp merges the pair whose joined text has the highest score). Both
// orders run through one MergeTable; ids equal HF tokenizers' and llama.cpp's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/token_table.h"

namespace anymoe {

// The pipeline around the model, as the loaders read it from the file.
struct SentencePieceOptions {
  // Where the "▁" marker is put in front of a text segment (the plain text
  // between added tokens).
  enum class Prefix : uint8_t {
    kNever,
    // Every non-empty segment: HF's Prepend("▁") normalizer, llama.cpp's
    // add_space_prefix (a space after the text start and after each special).
    kEverySegment,
    // HF Metaspace prepend_scheme "first": the segment that starts the text,
    // unless it already starts with "▁" (a leading space).
    kFirstSegment,
    // HF Metaspace prepend_scheme "always": every segment not starting with "▁".
    kUnlessMarked,
  };
  Prefix prefix = Prefix::kEverySegment;
  bool escape_spaces = true;     // ' ' -> "▁" (Replace normalizer, Metaspace)
  bool split_on_marker = false;  // HF Metaspace split: each "▁" starts a new word
  bool byte_fallback = true;     // a character without a token -> its <0xNN> tokens
  bool fuse_unk = false;         // consecutive unknown characters -> one unknown token
  int32_t unk_id = -1;           // GGUF tokenizer.ggml.unknown_token_id
  std::string unk_token;         // HF model.unk_token (resolved by Build), when unk_id < 0
  // GGUF: id -> score. Then the merges are every pair of tokens whose joined
  // text is a token, higher score first. Empty: the file's merges, in order.
  std::vector<float> scores;
  // Decode drops one leading space: HF's Strip(" ", 1, 0) or Metaspace
  // decoder, llama.cpp's remove_space for add_space_prefix.
  bool strip_decoded_space = true;
};

class SentencePieceBpe {
 public:
  // `texts`: every token's stored text, indexed. `ids`: the tokens the model
  // may produce (normal tokens, byte tokens included); `merges`: texts as
  // stored, in rank order (used when options.scores is empty; a merge naming
  // a text that is not one of `ids` is an error, as in HF tokenizers).
  static Expected<SentencePieceBpe> Build(const TokenTable& texts, const std::vector<int32_t>& ids,
                                          const std::vector<BpeModel::Merge>& merges,
                                          SentencePieceOptions options);

  // Appends the ids of one plain-text segment. `at_text_start`: the segment
  // begins the text being encoded (Prefix::kFirstSegment). Any bytes are
  // accepted: bytes that are not UTF-8 are characters of their own.
  void Encode(std::string_view segment, bool at_text_start, std::vector<int32_t>* ids) const;

  const SentencePieceOptions& options() const { return options_; }
  size_t merge_count() const { return merges_.size(); }
  size_t memory_bytes() const {
    return vocab_.memory_bytes() + vocab_ids_.capacity() * 4 + merges_.memory_bytes() +
           options_.scores.capacity() * 4;
  }

 private:
  int32_t VocabId(std::string_view text) const;
  void BuildScoreMerges();
  Status BuildRankMerges(const std::vector<BpeModel::Merge>& merges);
  // Appends the symbols of one word and merges them.
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  SentencePieceOptions options_;
  TokenTable vocab_;                // texts of the producible tokens, indexed
  std::vector<int32_t> vocab_ids_;  // entry -> token id
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_;   // byte -> id of its <0xNN> token, or -1
  std::array<int32_t, 128> ascii_ids_;  // ASCII character -> its token, or -1
};

// The bytes a SentencePiece token stands for when decoded: "<0xNN>" is that
// byte, any other token its text with each "▁" as a space (HF's Replace +
// ByteFallback decoders, llama.cpp's token_to_piece).
std::string SentencePieceTokenBytes(std::string_view text);

// True when `text` is a byte token "<0xNN>"; *byte is then its value.
bool IsSentencePieceByteToken(std::string_view text, uint8_t* byte);

}  // namespace anymoe
