// A byte-level pushdown automaton for the JSON documents a compiled schema
// accepts (json_schema.h): compact JSON with at most one space after ':' and
// ','; strings of valid UTF-8 (no escapes where a DFA drives the text);
// integers of at most 15 digits. A state is a set
// of stacks (anyOf keeps its alternatives until a byte rules them out), each a
// fixed array of frames, one per open value. ShortestCompletion gives the
// exact number of bytes that still close the document, which lets decoding
// always finish within its token budget.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/json_schema.h"

namespace anymoe {

struct JsonFrame {
  int32_t node = 0;
  uint8_t phase = 0;
  uint8_t flags = 0;  // bit 0: one space may come before the value / key
  int16_t aux = 0;    // digits, pending UTF-8 bytes, hex digits
  int32_t a = 0;      // object: next property; array: items done; string: length; literal: trie node
  int32_t b = 0;      // object: current property or key trie node; string: UTF-8 byte range
};

struct JsonStack {
  static constexpr int kMaxFrames = kMaxJsonNesting;
  std::array<JsonFrame, kMaxFrames> frames;
  int32_t depth = 0;
  bool done = false;  // the document is complete and nothing may follow
};

using JsonState = std::vector<JsonStack>;  // sorted, distinct; empty: dead

class JsonAutomaton {
 public:
  explicit JsonAutomaton(CompiledSchema schema);

  JsonState Start() const;
  // The state after `byte`; empty when the byte is not allowed.
  JsonState Advance(const JsonState& state, uint8_t byte) const;
  // Bytes that still complete the document from the best stack (0: complete).
  int64_t ShortestCompletion(const JsonState& state) const;
  // A key identifying the state, for caching masks.
  std::string Key(const JsonState& state) const;
  // When every stack sits inside a string's text (no escape or UTF-8 sequence
  // open), fills one entry per stack: characters that still fit (-1: any),
  // characters minLength still needs, and the stack's shortest completion.
  struct PlainString {
    int64_t room, need, completion;
  };
  bool InPlainString(const JsonState& state, std::vector<PlainString>* stacks) const;

  const CompiledSchema& schema() const { return schema_; }

 private:
  void Push(JsonStack st, int32_t node, bool space, uint8_t byte, JsonState* out) const;
  void Step(JsonStack st, uint8_t byte, JsonState* out) const;
  void ChildDone(JsonStack st, JsonState* out, const uint8_t* refeed) const;
  int64_t Closer(const JsonStack& st, int i) const;
  int64_t ObjectKeyCost(const SchemaNode& n, int32_t next, int32_t trie_node, int32_t depth,
                        int32_t frame_depth) const;
  int64_t RestAfter(const SchemaNode& n, int32_t prop) const;
  int64_t ArrayRest(const SchemaNode& n, int64_t done) const;
  uint64_t AllowedKeys(const SchemaNode& n, int32_t next, int32_t depth) const;
  // Whether a value of `n` opened on top of `st` can still be closed.
  bool Fits(const JsonStack& st, int32_t n) const { return st.depth + node(n).min_frames <= JsonStack::kMaxFrames; }
  const SchemaNode& node(int32_t i) const { return schema_.nodes[size_t(i)]; }

  CompiledSchema schema_;
  int32_t any_string_ = -1, any_number_ = -1, any_literal_ = -1, any_value_ = -1;
};

}  // namespace anymoe
