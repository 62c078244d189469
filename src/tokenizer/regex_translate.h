// Rewrites a pre-tokenizer pattern written for HF tokenizers' engine (Oniguruma,
// Ruby syntax) into PCRE2 syntax that matches the same code points. PCRE2 10.42
// knows Unicode 14; HF's engine a newer Unicode. So every class a pattern uses
// (\p{..}, \s, \d, \w, \h, bracket classes with nesting and &&) is computed as
// the exact code-point set the reference matches (unicode_category.h) and
// written back as one PCRE2 bracket. Everything else (groups, quantifiers,
// lookaround, anchors, literals) passes through unchanged, with Ruby's escapes
// that PCRE2 reads differently (\h, \v, \uHHHH) spelled out.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace anymoe {

// Patterns longer than this are rejected before translation.
inline constexpr size_t kMaxPreTokenizerPatternBytes = size_t{16} << 10;

// The PCRE2 pattern, to be compiled with PCRE2_UTF | PCRE2_UCP |
// PCRE2_MULTILINE (Ruby's ^ and $ are line anchors) and LF newlines. An error
// names the construct and its byte offset.
Expected<std::string> TranslateOnigurumaPattern(std::string_view pattern);

}  // namespace anymoe
