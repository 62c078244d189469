// Byte trie over the added tokens' contents and the leftmost-longest splitter.
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

// Code point ending just before byte offset `end` (kInvalidCodepoint when none).
uint32_t CodepointBefore(std::string_view text, size_t end) {
  if (end == 0) return kInvalidCodepoint;
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  uint32_t cp = 0;
  size_t len = 0;
  if (DecodeUtf8At(text, start, &cp, &len) != Utf8Step::kValid || start + len != end) {
    return kInvalidCodepoint;
  }
  return cp;
}

uint32_t CodepointAt(std::string_view text, size_t pos, size_t* len) {
  uint32_t cp = 0;
  if (pos >= text.size() || DecodeUtf8At(text, pos, &cp, len) != Utf8Step::kValid) {
    *len = 1;
    return kInvalidCodepoint;
  }
  return cp;
}

bool IsSpaceCp(uint32_t cp) {
  return cp != kInvalidCodepoint && ClassifyCodepoint(cp) == CharClass::kWhitespace;
}

bool IsWordCp(uint32_t cp) {
  if (cp == kInvalidCodepoint) return false;
  const CharClass cls = ClassifyCodepoint(cp);
  return cls == CharClass::kLetter || cls == CharClass::kNumber || cp == '_';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    if (tokens_[t].content.empty()) continue;
    starts_token_[static_cast<uint8_t>(tokens_[t].content[0])] = true;
    int32_t node = 0;
    for (char c : tokens_[t].content) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t next = Child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& children = nodes_[node].children;
        children.insert(
            std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1})),
            {byte, next});
      }
      node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
    if (nodes_[node].plain_token < 0 && !tokens_[t].special) {
      nodes_[node].plain_token = static_cast<int32_t>(t);
    }
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, uint8_t byte) const {
  const auto& children = nodes_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
  return (it != children.end() && it->first == byte) ? it->second : -1;
}

int AddedTokenMatcher::LongestAt(std::string_view text, size_t pos, size_t special_limit,
                                 size_t* end) const {
  int found = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    const int32_t token = i < special_limit ? nodes_[node].token : nodes_[node].plain_token;
    if (token >= 0) {
      found = token;
      *end = i + 1;
    }
  }
  return found;
}

bool AddedTokenMatcher::AcceptsSingleWord(std::string_view text, size_t begin, size_t end) const {
  size_t len = 0;
  return !IsWordCp(CodepointBefore(text, begin)) && !IsWordCp(CodepointAt(text, end, &len));
}

void AddedTokenMatcher::Split(std::string_view text, bool match_special,
                              const std::function<void(std::string_view, int)>& segment,
                              std::span<const TextRange> plain_ranges) const {
  if (tokens_.empty()) {
    if (!text.empty()) segment(text, -1);
    return;
  }
  size_t emitted = 0;  // text before this offset has been handed out
  size_t pos = 0;
  size_t next_plain = 0;  // first range not wholly before pos
  while (pos < text.size()) {
    while (pos < text.size() && !starts_token_[static_cast<uint8_t>(text[pos])]) ++pos;
    if (pos == text.size()) break;
    while (next_plain < plain_ranges.size() && plain_ranges[next_plain].end <= pos) ++next_plain;
    // A special token may end no later than where the next plain range starts.
    size_t special_limit = 0;
    if (match_special) {
      special_limit = next_plain < plain_ranges.size()
                          ? std::max(pos, plain_ranges[next_plain].begin)
                          : text.size();
    }
    size_t end = 0;
    const int t = LongestAt(text, pos, special_limit, &end);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[t];
    if (token.single_word && !AcceptsSingleWord(text, pos, end)) {
      pos = end;
      continue;
    }
    size_t begin = pos;
    if (token.lstrip) {
      while (begin > emitted) {
        const uint32_t cp = CodepointBefore(text, begin);
        const size_t cp_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (!IsSpaceCp(cp) || begin - emitted < cp_len) break;
        begin -= cp_len;
      }
    }
    if (token.rstrip) {
      size_t len = 0;
      while (end < text.size() && IsSpaceCp(CodepointAt(text, end, &len))) end += len;
    }
    if (begin > emitted) segment(text.substr(emitted, begin - emitted), -1);
    segment(text.substr(begin, end - begin), t);
    emitted = pos = end;
  }
  if (emitted < text.size()) segment(text.substr(emitted), -1);
}

}  // namespace anymoe
