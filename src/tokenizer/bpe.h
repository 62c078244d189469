// Byte-level BPE: GPT-2's byte<->character alphabet and the merge-by-rank model
// that HF tokenizers' BPE implements. Vocabulary entries are keyed by their raw
// bytes; merging uses a heap over a linked list of symbols, O(n log n) per piece.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace anymoe {

// Decodes GPT-2 byte-level text (each character stands for one byte) into raw
// bytes; false when a character is outside the 256-character alphabet.
bool ByteLevelDecode(std::string_view token_text, std::string* bytes);

// Encodes raw bytes into GPT-2 byte-level text.
std::string ByteLevelEncode(std::string_view bytes);

// Heterogeneous hashing so string_view keys look up std::string maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using BytesToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Merge {
    std::string left, right;  // byte-level text, as tokenizer.json / GGUF store them
  };

  // `vocab`: byte-level token text -> id for the model's vocabulary. Entries whose
  // text is outside the byte alphabet can never be produced and are dropped; merges
  // that name unknown tokens are skipped (counted in skipped_merges()). A repeated
  // pair keeps its last rank, as HF's BPE does.
  static BpeModel Build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                        const std::vector<Merge>& merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized piece (raw bytes). Bytes without a
  // single-byte token are dropped, as HF's BPE does when it has no unk token.
  void Encode(std::string_view piece, std::vector<int32_t>* ids) const;

  size_t merge_count() const { return merges_.size(); }
  size_t skipped_merges() const { return skipped_merges_; }

 private:
  struct MergeResult {
    int32_t rank;
    int32_t id;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const MergeResult* FindMerge(int32_t left, int32_t right) const;

  BytesToId vocab_;
  std::unordered_map<uint64_t, MergeResult> merges_;
  int32_t byte_ids_[256];
  bool ignore_merges_ = false;
  size_t skipped_merges_ = 0;
};

}  // namespace anymoe
