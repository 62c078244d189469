// The ECMA-262 regular expressions JSON Schema's `pattern` uses, compiled to a
// byte DFA (byte_dfa.h) over the text of a JSON string. Supported: literals,
// `.`, classes `[...]` / `[^...]` with ranges, `\d \w \s \D \W \S`, escapes
// (`\t \n \r \f \v \0 \xHH \uHHHH` and escaped punctuation), groups `( )`,
// `(?: )`, `(?<name> )`, alternation, quantifiers `* + ? {n} {n,} {n,m}` (lazy
// forms too: same language), and `^` / `$` at the ends of top-level
// alternatives. Refused with the reason: back-references, look-around, `\b`,
// Unicode property escapes, anchors elsewhere.
//
// A pattern matches anywhere (JSON Schema semantics): an alternative without
// `^` / `$` gets any text before / after it. Generated text never holds '"',
// '\\' or control characters (they would need escapes); outside ASCII, `\D`,
// `\W`, `\S` and negated classes holding them only produce ASCII, where
// ECMA-262 and Python's `re` (what jsonschema uses) agree.
#pragma once

#include <string>

#include "chat/byte_dfa.h"
#include "core/status.h"

namespace anymoe {

enum class RegexMatch {
  kSearch,  // JSON Schema `pattern`: a match anywhere in the text
  kWhole,   // the whole text (formats and number grammars)
};

// Errors say why (e.g. "back-references (\\1) are not supported").
Expected<ByteDfa> CompileRegex(const std::string& pattern, RegexMatch match, size_t max_states);

}  // namespace anymoe
