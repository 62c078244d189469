// UTF-8 decoding and the Unicode character classes the pre-tokenizer scanners need.
// Classes follow what HF tokenizers' regex engine (Oniguruma, Unicode 16) means by
// \p{L}, \p{N} and \s, so the hand-written scanners split byte-identically to the
// reference regexes; invalid UTF-8 never fails, it decodes to replacement entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace anymoe {

enum class CharClass : uint8_t { kLetter, kNumber, kWhitespace, kOther };

// Marks a TextChar that is an invalid UTF-8 byte sequence rather than a code point.
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFFu;

// One decoded character of a text: byte offset and length in the text, the code
// point (kInvalidCodepoint for an ill-formed sequence) and its class.
struct TextChar {
  size_t offset;
  uint32_t cp;
  uint8_t len;  // 1..4
  CharClass cls;
};  // 16 bytes: DecodeText of an n-byte text needs at most 16n bytes

// \p{L} -> kLetter, \p{N} -> kNumber, \s (Unicode White_Space) -> kWhitespace.
CharClass ClassifyCodepoint(uint32_t cp);

// Rust's char::is_numeric, which HF's Digits pre-tokenizer uses (a few more code
// points than the regex engine's \p{N}).
bool IsDigitsNumeric(uint32_t cp);

// Python's str.isspace(): White_Space plus U+001C..U+001F. Chat templates strip with it.
bool IsPythonSpace(uint32_t cp);

enum class Utf8Step : uint8_t { kValid, kInvalid, kTruncated };

// Decodes the sequence at text[i] (i < text.size()). kValid: *cp and *len set.
// kInvalid: *len is the maximal ill-formed subpart (>= 1, Unicode 3.9 / WHATWG).
// kTruncated: a well-formed prefix that runs into the end of the text.
Utf8Step DecodeUtf8At(std::string_view text, size_t i, uint32_t* cp, size_t* len);

// Decodes the whole text; every byte belongs to exactly one entry.
std::vector<TextChar> DecodeText(std::string_view text);

void AppendUtf8(uint32_t cp, std::string* out);

// Copies `bytes`, replacing each maximal ill-formed subpart (and a truncated tail)
// with U+FFFD, like Rust's String::from_utf8_lossy.
std::string ToValidUtf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside a well-formed
// but unfinished sequence (at most 3 bytes are held back).
size_t CompleteUtf8PrefixLength(std::string_view bytes);

}  // namespace anymoe
