// Building the vocabulary index (vocabulary_index.h).
#include "chat/vocabulary_index.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

void AddToTrie(std::vector<VocabularyIndex::TrieNode>* trie, std::string_view bytes, int32_t id) {
  if (trie->empty()) trie->emplace_back();
  int32_t node = 0;
  for (uint8_t b : bytes) {
    int32_t next = -1;
    for (const auto& [eb, child] : (*trie)[size_t(node)].edges) {
      if (eb == b) next = child;
    }
    if (next < 0) {
      next = int32_t(trie->size());
      (*trie)[size_t(node)].edges.emplace_back(b, next);
      trie->emplace_back();
    }
    node = next;
  }
  (*trie)[size_t(node)].tokens.push_back(id);
}

// Code points of `bytes` when it is complete UTF-8 that may stand inside a JSON
// string unescaped; -1 otherwise.
int32_t PlainStringChars(std::string_view bytes) {
  int32_t n = 0;
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp;
    size_t len;
    if (DecodeUtf8At(bytes, i, &cp, &len) != Utf8Step::kValid) return -1;
    if (cp < 0x20 || cp == '"' || cp == '\\') return -1;
    i += len;
    ++n;
  }
  return n;
}

}  // namespace

Expected<std::shared_ptr<const VocabularyIndex>> VocabularyIndex::Build(const Tokenizer& tokenizer) {
  auto v = std::make_shared<VocabularyIndex>();
  v->vocab_size_ = tokenizer.vocab_size();
  v->pieces_.resize(size_t(v->vocab_size_));
  bool single[256] = {};
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const TokenKind kind = tokenizer.kind(id);
    if (kind == TokenKind::kSpecial || kind == TokenKind::kUnused) continue;
    const std::string_view piece = tokenizer.TokenPiece(id);
    if (piece.empty()) continue;
    v->pieces_[size_t(id)] = std::string(piece);
    if (piece.size() == 1) single[uint8_t(piece[0])] = true;
    AddToTrie(&v->trie_, piece, id);
    const int32_t chars = PlainStringChars(piece);
    if (chars > 0) {
      v->plain_.emplace_back(id, chars);
    } else {
      AddToTrie(&v->string_trie_, piece, id);
    }
  }
  if (v->string_trie_.empty()) v->string_trie_.emplace_back();
  for (int b = 0; b < 256; ++b) {
    v->single_byte_[size_t(b)] = single[b];
    // Closing a document needs printable ASCII and UTF-8 continuation bytes
    // (other bytes only where a schema's keys or literals hold them: Create).
    if (b < 0x20 || b == 0x7F || b > 0xBF) continue;
    if (!single[b]) {
      return Status::Error("constrained decoding: byte " + std::to_string(b) +
                           " has no single-byte token; constrained decoding needs byte-level tokens");
    }
  }
  return std::shared_ptr<const VocabularyIndex>(std::move(v));
}

}  // namespace anymoe
