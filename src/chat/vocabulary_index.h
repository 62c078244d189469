// A tokenizer's vocabulary as byte strings, indexed for constrained decoding:
// a byte trie of every text token (a mask walk visits each shared prefix
// once), the pieces by id, and which bytes have a single-byte token. Shared
// by the JSON-schema and GBNF constraints; built once per model.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace anymoe {

class Tokenizer;

// The tokenizer's vocabulary as byte strings in a trie; built once per model.
class VocabularyIndex {
 public:
  // Fails when some byte has no single-byte token (needed to close documents).
  static Expected<std::shared_ptr<const VocabularyIndex>> Build(const Tokenizer& tokenizer);

  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> edges;  // byte -> node
    std::vector<int32_t> tokens;                     // tokens whose bytes end here
  };
  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<TrieNode>& trie() const { return trie_; }          // every text token
  const std::vector<TrieNode>& string_trie() const { return string_trie_; }  // tokens not plain in strings
  // Tokens that are complete UTF-8 without '"', '\\' or bytes < 0x20, with
  // their code point counts: inside a string's text they only add characters.
  const std::vector<std::pair<int32_t, int32_t>>& plain_string_tokens() const { return plain_; }
  // The bytes of a token (empty for special and unused ids, which never match).
  std::string_view piece(int32_t id) const { return pieces_[size_t(id)]; }
  bool has_single_byte(uint8_t b) const { return single_byte_[b]; }

 private:
  int32_t vocab_size_ = 0;
  std::vector<std::string> pieces_;
  std::array<bool, 256> single_byte_{};
  std::vector<TrieNode> trie_, string_trie_;
  std::vector<std::pair<int32_t, int32_t>> plain_;
};

}  // namespace anymoe
