// Byte-level BPE: GPT-2's byte<->character alphabet and the merge-by-rank model
// that HF tokenizers' BPE implements. Vocabulary entries are keyed by their raw
// bytes (a TokenTable index); merges live in a MergeTable (merge_table.h), whose
// heap over a linked list of symbols merges in O(n log n) per piece.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/token_table.h"

namespace anymoe {

// Decodes GPT-2 byte-level text (each character stands for one byte) into raw
// bytes; false when a character is outside the 256-character alphabet.
bool ByteLevelDecode(std::string_view token_text, std::string* bytes);

// Encodes raw bytes into GPT-2 byte-level text.
std::string ByteLevelEncode(std::string_view bytes);

class BpeModel {
 public:
  struct Merge {
    std::string left, right;  // byte-level text, as tokenizer.json / GGUF store them
    // < 0: the merge's index in the list (tokenizer.json, GGUF). tiktoken ranks
    // a pair by the token it makes, so every split of one token shares that
    // token's rank, and among equal ranks the leftmost pair merges first.
    int32_t rank = -1;
  };

  // `ids`: the model's vocabulary, whose byte-level texts are `texts[id]`.
  // Entries whose text is outside the byte alphabet can never be produced and
  // are dropped. A
  // merge must name tokens of the file, as HF tokenizers requires (it refuses a
  // merge whose parts or result are not in the vocabulary): one naming a text
  // for which `is_token` is false is an error; one whose tokens exist but
  // outside the byte-level vocabulary (special or undecodable tokens) is
  // skipped (counted in skipped_merges()). A repeated pair keeps its last rank,
  // as HF's BPE does.
  static Expected<BpeModel> Build(const TokenTable& texts, const std::vector<int32_t>& ids,
                                  const std::vector<Merge>& merges, bool ignore_merges,
                                  const std::function<bool(std::string_view)>& is_token);

  // Appends the ids of one pre-tokenized piece (raw bytes). Bytes without a
  // single-byte token are dropped, as HF's BPE does when it has no unk token.
  void Encode(std::string_view piece, std::vector<int32_t>* ids) const;

  size_t merge_count() const { return merges_.size(); }
  size_t memory_bytes() const {
    return vocab_bytes_.memory_bytes() + vocab_ids_.capacity() * 4 + merges_.memory_bytes();
  }
  size_t skipped_merges() const { return skipped_merges_; }
  // The most slots a merge lookup walks (from a pair's home slot to its own):
  // the hash table's health, checked by tests.
  size_t longest_merge_probe() const { return merges_.longest_probe(); }

 private:
  // Id of the vocabulary entry whose bytes are `bytes`, or -1.
  int32_t VocabId(std::string_view bytes) const;

  TokenTable vocab_bytes_;          // decoded bytes of each vocabulary entry, indexed
  std::vector<int32_t> vocab_ids_;  // entry -> token id
  MergeTable merges_;
  int32_t byte_ids_[256];
  bool ignore_merges_ = false;
  size_t skipped_merges_ = 0;
};

}  // namespace anymoe
