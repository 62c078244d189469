// Helpers shared by the model-file and request parsers: strict JSON parsing
// (nesting depth capped, duplicate keys rejected, linear time, nothing thrown)
// and safe quoting of names read from files into error messages. JSON from
// model files and requests is hostile input (reliability.md §1.1 "deeply
// nested JSON", §1.4 rule 3; issue 20: nlohmann's callback parser rescans the
// parent container at every closed value, quadratic in the input).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

struct JsonLimits {
  int max_depth = 64;  // containers nested deeper than this are rejected mid-parse
  bool reject_duplicate_keys = true;
  // Errors name a duplicate key (escaped, cut). Off for request bodies, whose
  // errors must not echo request text (reliability.md E5).
  bool quote_keys_in_errors = true;
  // Values (scalars and containers) and containers (objects and arrays) in
  // the whole document; 0: no limit. Checked as each opens, so a tree past a
  // limit is never built (request bodies: a 1 MiB body of `{},` would
  // otherwise build 350,000 objects, ~35 MB of tree).
  uint64_t max_values = 0;
  uint64_t max_containers = 0;
};

// Builds a nlohmann::json tree from the parser's SAX events in one pass, so
// parsing is linear in the input: each value is placed once, and a duplicate
// key is found by the object's own lookup (O(log n)). The depth limit is
// checked when a container opens, before anything is built below it.
//
// Large collections can be streamed instead of kept: StreamChildren(path,
// sink) hands each child of the object or array at `path` (keys from the
// root; {} is the root itself) to `sink` as soon as it is complete, as its own
// small tree, and keeps nothing of it; the container stays empty in the
// result. Memory then holds one child at a time (a safetensors header's
// tensors, a tokenizer's vocabulary). Duplicate keys among streamed children
// are the sink's to detect.
class JsonDomBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  using json = nlohmann::json;
  // `key` is the member name ("" in arrays), `index` the child's position.
  // Returns false to stop the parse (after Fail(message)).
  using Sink = std::function<bool(std::string_view key, size_t index, json&& value)>;

  explicit JsonDomBuilder(const JsonLimits& limits) : limits_(limits) {}

  void StreamChildren(std::vector<std::string> path, Sink sink);

  bool null() override;
  bool boolean(bool val) override;
  bool number_integer(number_integer_t val) override;
  bool number_unsigned(number_unsigned_t val) override;
  bool number_float(number_float_t val, const string_t& s) override;
  bool string(string_t& val) override;
  bool binary(binary_t& val) override;
  bool start_object(std::size_t elements) override;
  bool key(string_t& val) override;
  bool end_object() override;
  bool start_array(std::size_t elements) override;
  bool end_array() override;
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override;

  // The error that stopped the parse ("" while none).
  const std::string& error() const { return error_; }
  // Stops the parse with `message` (returns false for the SAX callback).
  bool Fail(std::string message);
  json& root() { return root_; }

 private:
  struct Stream {
    std::vector<std::string> path;
    Sink sink;
  };
  // One open container. A streaming one builds each child in `slot` and
  // hands it to its sink when complete.
  struct Level {
    json* value = nullptr;
    const Stream* stream = nullptr;
    std::string name;  // the key it was opened under (kept for path matching)
    std::string key;   // streaming objects: the current child's key
    json slot;         // streaming: the child being built
    size_t index = 0;  // streaming: children handed over so far
  };
  template <typename Value>
  bool Put(Value&& v);
  bool Open(json&& empty);
  bool Close();
  bool Deliver(Level& level);

  // Counts one more value (a container if `container`) against the limits.
  bool Count(bool container);

  JsonLimits limits_;
  uint64_t values_ = 0, containers_ = 0;
  json root_;
  std::deque<Level> stack_;      // deque: a slot never moves while a child is built in it
  json* next_member_ = nullptr;  // the object slot the last key made
  std::string next_name_;        // that key, while it may name a streamed path
  std::vector<Stream> streams_;
  size_t stream_depth_ = 0;  // the longest registered path
  std::string error_;
};

// Parses `text` as one JSON document with `builder`; `name` (usually the file
// path) starts each error line. Error lines name the byte offset and the
// problem but never the input bytes.
Status ParseJsonWith(std::string_view text, const std::string& name, JsonDomBuilder& builder);

// Parses `text` as one JSON document. `name` (usually the file path) starts each
// error line. The depth limit is enforced while parsing, so no deep tree is built.
Expected<nlohmann::json> ParseJsonStrict(std::string_view text, const std::string& name,
                                         const JsonLimits& limits = {});

// Reads `path` (at most `max_bytes`) and parses it with ParseJsonStrict.
Expected<nlohmann::json> ReadJsonFile(const std::string& path, uint64_t max_bytes,
                                      const JsonLimits& limits = {});

// `'name'` with control and non-ASCII bytes escaped as \xNN and long names cut, so
// a hostile name cannot corrupt a log line.
std::string QuoteName(std::string_view s);

}  // namespace anymoe
