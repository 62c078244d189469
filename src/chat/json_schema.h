// JSON Schema (the subset structured output needs) compiled into a graph of
// value nodes that the byte automaton (json_automaton.h) walks. Supported:
// type (object, array, string, number, integer, boolean, null, or a list of
// them), properties, required, additionalProperties (extra properties are
// never generated, so any value validates), items, minItems, maxItems,
// minLength, maxLength, enum, const, anyOf, local $ref to $defs/definitions
// (not recursive), nesting up to 32 levels, and the annotations title,
// description, default, examples, $schema, $id, $comment, strict. Anything
// else (pattern, format, minimum, oneOf, allOf, not, prefixItems, ...) is
// refused with an error naming the keyword. `json_object` mode is the node
// kAnyObject: any JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace anymoe {

enum class SchemaKind : uint8_t {
  kObject, kArray, kString, kNumber, kInteger, kLiterals, kAnyOf,
  kAnyValue, kAnyObject, kAnyArray,  // unconstrained JSON (json_object mode, untyped schemas)
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
  int32_t items = -1;                      // kArray: element node
  int64_t min_items = 0, max_items = -1;   // kArray (-1: unbounded)
  int64_t min_length = 0, max_length = -1; // kString, in code points
  LiteralTrie literals;                    // kLiterals (compact JSON texts); kObject keys
  std::vector<int32_t> alternatives;       // kAnyOf
  int64_t min_bytes = 0;                   // length of the shortest valid value
  std::string shortest;                    // that value
};

struct CompiledSchema {
  std::vector<SchemaNode> nodes;
  int32_t root = -1;
};

// Compiles a JSON schema; errors name the unsupported keyword or bad value.
Expected<CompiledSchema> CompileJsonSchema(const nlohmann::ordered_json& schema);
// json_object: any object.
CompiledSchema AnyJsonObjectSchema();

}  // namespace anymoe
