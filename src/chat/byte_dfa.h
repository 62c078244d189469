// Deterministic automata over bytes for the JSON values a schema constrains by
// their text: strings with a `pattern` or `format`, integers and numbers with
// a range or `multipleOf`. Built from a Thompson NFA by subset construction
// (linear-time matching, so no pattern can backtrack) with a cap on states,
// then trimmed so that every state left can still reach acceptance: decoding
// driven by the DFA never walks into a dead end, and `distance` gives the
// exact number of bytes that still complete the text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace anymoe {

// A nondeterministic automaton under construction: byte-range and epsilon edges.
class ByteNfa {
 public:
  int32_t AddState();
  void AddEpsilon(int32_t from, int32_t to);
  void AddBytes(int32_t from, int32_t to, uint8_t lo, uint8_t hi);
  // Edges from `from` to `to` reading one UTF-8 encoded code point in [lo, hi]
  // (surrogates excluded).
  void AddCodePoints(int32_t from, int32_t to, uint32_t lo, uint32_t hi);
  size_t size() const { return states_.size(); }

  struct Edge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int32_t> epsilon;
  };
  const std::vector<State>& states() const { return states_; }

 private:
  void AddSameLength(int32_t from, int32_t to, uint32_t lo, uint32_t hi);
  std::vector<State> states_;
};

struct ByteDfa {
  static constexpr int32_t kNone = -1;
  std::vector<int32_t> next;        // [state * 256 + byte] -> state or kNone
  std::vector<uint8_t> accepting;   // [state]
  std::vector<int32_t> distance;    // [state]: fewest bytes to an accepting state
  std::vector<uint8_t> has_next;    // [state]: some byte continues
  int32_t start = 0;
  std::string shortest;             // the shortest accepted text

  int32_t size() const { return int32_t(accepting.size()); }
  int32_t Next(int32_t state, uint8_t byte) const { return next[size_t(state) * 256 + byte]; }
  // Whether the whole of `text` is accepted (for tests).
  bool Matches(const std::string& text) const;
};

// Subset construction from `start` to `accept`; fails past `max_states` or
// when the language is empty (both named in the message).
Expected<ByteDfa> Determinize(const ByteNfa& nfa, int32_t start, int32_t accept, size_t max_states);
// The texts both accept; fails past `max_states` or when empty.
Expected<ByteDfa> Intersect(const ByteDfa& a, const ByteDfa& b, size_t max_states);
// Texts of `min_chars` to `max_chars` code points (-1: unbounded), counting
// every byte that is not a UTF-8 continuation byte; meant to be intersected
// with a UTF-8 DFA. Fails when it needs more than `max_states` states.
Expected<ByteDfa> CodePointRange(int64_t min_chars, int64_t max_chars, size_t max_states);

}  // namespace anymoe
