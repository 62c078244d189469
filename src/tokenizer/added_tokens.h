// Added (special and user-defined) tokens are cut out of the text before
// pre-tokenization, leftmost-longest like HF tokenizers' AddedVocabulary, with its
// lstrip / rstrip / single_word options. Matching walks a byte trie from each
// position: O(text length x longest token), no recursion.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace anymoe {

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

struct AddedToken {
  int32_t id = -1;
  std::string content;  // literal bytes to match
  bool special = false;
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Calls `segment(bytes, token_index)` for consecutive segments covering `text`:
  // token_index < 0 for plain text, else an index into tokens() for a match (the
  // bytes then include any whitespace swallowed by lstrip/rstrip). Without
  // `match_special`, special tokens are not looked for at all: their text stays
  // part of the surrounding plain text (HF's encode_special_tokens).
  // `plain_ranges` (sorted, disjoint) narrows `match_special`: a special token
  // whose bytes overlap one of them is not matched there, so untrusted text
  // spliced into a template cannot become a control token.
  void Split(std::string_view text, bool match_special,
             const std::function<void(std::string_view, int)>& segment,
             std::span<const TextRange> plain_ranges = {}) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;        // index into tokens_ of the token ending here
    int32_t plain_token = -1;  // the same, among non-special tokens only
  };
  int32_t Child(int32_t node, uint8_t byte) const;
  // Longest token starting at `pos`: returns its index and sets *end, or -1.
  // Special tokens count only when they end at or before `special_limit`.
  int LongestAt(std::string_view text, size_t pos, size_t special_limit, size_t* end) const;
  bool AcceptsSingleWord(std::string_view text, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  // Whether some token starts with this byte: Split skips every other position
  // without walking the trie (most text never starts a token).
  std::array<bool, 256> starts_token_{};
};

}  // namespace anymoe
