// The pushdown machine of a GBNF grammar (gbnf_grammar.h), read byte by byte.
// A state is a set of stacks of element positions (the top, last, is always
// a character class; an empty stack has matched the whole root), plus the
// code point being read when a UTF-8 sequence is cut between bytes (tokens
// split code points). The stack set and each stack's depth are bounded, so a
// hostile grammar costs bounded time and memory per byte; ShortestCompletion
// gives the bytes still needed to reach the end of the root (shortest
// derivation per rule, by fixed point), which keeps the output closable
// within the token budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/gbnf_grammar.h"
#include "core/status.h"

namespace anymoe {

using GrammarStack = std::vector<uint32_t>;  // positions in GbnfGrammar::elements

struct GrammarState {
  std::vector<GrammarStack> stacks;  // sorted, distinct; empty: nothing fits
  uint32_t partial = 0;              // bits of the code point begun
  uint8_t need = 0;                  // its continuation bytes still to come
  uint8_t length = 0;                // its UTF-8 length
  bool dead() const { return stacks.empty(); }
};

struct GrammarMachineLimits {
  size_t max_stacks = 1024;
  size_t max_depth = 512;
};

class GrammarPushdown {
 public:
  explicit GrammarPushdown(GbnfGrammar grammar, GrammarMachineLimits limits = {});

  // The state before any byte; grammar_state_limit when it already exceeds
  // the limits.
  Expected<GrammarState> Start() const;
  // The state after `byte`: dead() when the grammar refuses it;
  // grammar_state_limit when the stacks would pass the limits.
  Expected<GrammarState> Advance(const GrammarState& state, uint8_t byte) const;
  // The bytes read so far form a complete string of the root's language.
  bool Accepting(const GrammarState& state) const;
  // Accepting, and no byte may follow.
  bool Complete(const GrammarState& state) const;
  // Fewest bytes that take `state` to Accepting (INT64_MAX: none).
  int64_t ShortestCompletion(const GrammarState& state) const;
  // A byte string that identifies the state (cache key).
  std::string Key(const GrammarState& state) const;

  const GbnfGrammar& grammar() const { return grammar_; }

 private:
  // Expands `seeds` (tops may be rule references or alternative ends) until
  // every top is a character class or the stack is empty; appends to `out`.
  Status Expand(std::vector<GrammarStack> seeds, std::vector<GrammarStack>* out) const;
  Expected<GrammarState> AdvanceCodePoint(const GrammarState& state, uint32_t cp) const;
  // The code points a begun UTF-8 sequence may still become.
  void PartialRange(const GrammarState& state, uint32_t* lo, uint32_t* hi) const;
  bool TopMatchesSome(const GrammarStack& stack, uint32_t lo, uint32_t hi) const;

  GbnfGrammar grammar_;
  GrammarMachineLimits limits_;
  std::vector<int64_t> suffix_;  // per element: fewest bytes from it to its alternative's end
};

}  // namespace anymoe
