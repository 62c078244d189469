// JSON Schema (the subset structured output needs) compiled into a graph of
// value nodes that the byte automaton (json_automaton.h) walks. docs/chat.md
// lists the keywords; in short: type, properties, required,
// additionalProperties, patternProperties (one pattern), propertyNames,
// dependentRequired, min/maxProperties (where the listed properties already
// satisfy them), items, prefixItems, minItems, maxItems, minLength,
// maxLength, pattern, format, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf (integers), enum, const, anyOf, oneOf (where
// the alternatives are disjoint), allOf (merged), local $ref to
// $defs/definitions (recursive too: the node graph has cycles and the
// automaton's stack bounds the depth), and annotations (title, description,
// default, examples, discriminator, ...). Anything else is refused with
// "keyword 'X' at /path: why". `json_object` mode is kAnyObject.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/byte_dfa.h"
#include "core/status.h"

namespace anymoe {

// The deepest nesting a generated value may have (the automaton's stack).
inline constexpr int kMaxJsonNesting = 32;

enum class SchemaKind : uint8_t {
  kObject, kArray, kString, kNumber, kInteger, kLiterals, kAnyOf,
  kAnyValue, kAnyObject, kAnyArray,  // unconstrained JSON (json_object mode, untyped schemas)
  kMap,  // an object whose keys are `key` strings and values `items` (additionalProperties)
};

// A trie of byte strings (object keys, enum literals); node 0 is the root.
struct LiteralTrie {
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> edges;
    int32_t terminal = -1;     // index of the string ending here, or -1
    uint64_t leaves = 0;       // bit i: string i ends at or below (first 64 strings)
    int32_t depth = 0;
    int32_t min_length = INT32_MAX;  // length of the shortest string at or below
  };
  std::vector<Node> nodes;
  std::vector<std::string> strings;
  void Add(const std::string& s);
  int32_t Child(int32_t node, uint8_t byte) const;  // -1 when none
};

struct SchemaProperty {
  std::string key_json;  // the key as a JSON string literal, quotes included
  int32_t node = -1;
  bool required = false;
};

struct SchemaNode {
  SchemaKind kind = SchemaKind::kAnyValue;
  std::vector<SchemaProperty> properties;  // kObject, in generation order
  int32_t items = -1;                      // kArray: items after `prefix` (-1: none); kMap: values
  std::vector<int32_t> prefix;             // kArray: prefixItems
  int32_t key = -1;                        // kMap: the key (a kString node)
  int64_t min_items = 0, max_items = -1;   // kArray (-1: unbounded)
  int64_t min_length = 0, max_length = -1; // kString without `dfa`, in code points
  int32_t dfa = -1;  // kString: the text's DFA; kInteger / kNumber: the number's (CompiledSchema::dfas)
  LiteralTrie literals;                    // kLiterals (compact JSON texts); kObject keys
  std::vector<int32_t> alternatives;       // kAnyOf
  int64_t min_bytes = 0;                   // length of the shortest valid value
  int32_t min_frames = 1;                  // automaton frames that value needs (its nesting)
  std::string shortest;                    // that value
};

struct CompiledSchema {
  std::vector<SchemaNode> nodes;
  std::vector<ByteDfa> dfas;
  int32_t root = -1;
};

// Caps that keep compilation and the mask walk bounded on hostile schemas.
struct SchemaLimits {
  size_t max_nodes = 4096;
  size_t max_dfa_states = 4096;        // one pattern / format / range
  size_t max_total_dfa_states = 16384; // all of them (1 KiB each)
  size_t max_enum_values = 4096;
  size_t max_literal_bytes = size_t(1) << 20;
};

// Compiles a JSON schema; errors are "keyword 'X' at /path: why".
Expected<CompiledSchema> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                           const SchemaLimits& limits = SchemaLimits());
// json_object: any object.
CompiledSchema AnyJsonObjectSchema();

}  // namespace anymoe
