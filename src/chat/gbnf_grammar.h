// GBNF, the grammar notation of llama.cpp (grammars/README.md there), parsed
// into flat rules for the pushdown constraint (grammar_constraint.h): rules
// `name ::= ...`, alternation, grouping, the repetitions * + ? {m} {m,} {m,n}
// {,n}, string literals, character classes, `.` and comments. Groups and
// repetitions become generated rules, so a rule is a list of alternatives,
// each a sequence of character classes and rule references. A grammar is
// untrusted input: its size, nesting and repetition counts are bounded, and
// rules that cannot end (left recursion, no finite string) are refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

struct GbnfCharRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

struct GbnfElement {
  enum class Kind : uint8_t { kChars, kRule, kEnd };
  Kind kind = Kind::kEnd;
  bool negated = false;      // kChars: matches the code points outside the ranges
  uint32_t rule = 0;         // kRule
  uint32_t ranges_begin = 0;  // kChars: sorted, disjoint ranges in GbnfGrammar::ranges
  uint32_t ranges_count = 0;
};

struct GbnfGrammar {
  // Every alternative of every rule, each ended by a kEnd element.
  std::vector<GbnfElement> elements;
  // Per rule, the index in `elements` where each alternative starts.
  std::vector<std::vector<uint32_t>> alternatives;
  std::vector<std::string> rule_names;  // generated rules: "parent-N"
  std::vector<GbnfCharRange> ranges;
  uint32_t root = 0;

  bool Matches(const GbnfElement& chars, uint32_t cp) const;
  // Some code point of [lo, hi] matches.
  bool MatchesSome(const GbnfElement& chars, uint32_t lo, uint32_t hi) const;
};

struct GbnfLimits {
  size_t max_bytes = 256 * 1024;   // grammar text
  size_t max_rules = 4096;         // named and generated
  size_t max_elements = 1 << 17;   // after expanding repetitions
  uint32_t max_repetition = 1024;  // m and n of {m,n}
  int max_nesting = 64;            // parentheses
};

// Error codes (Status::code(), kInvalidArgument): grammar_parse_error (the
// message gives line:column), grammar_undefined_rule, grammar_missing_root,
// grammar_left_recursion, grammar_empty_language (a rule derives no finite
// string), grammar_too_large (a limit above).
Expected<GbnfGrammar> ParseGbnf(std::string_view text, const GbnfLimits& limits = {});

}  // namespace anymoe
