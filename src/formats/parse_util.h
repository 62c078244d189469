// Helpers shared by the model-file parsers: strict JSON parsing (nesting depth
// capped, duplicate keys rejected, nothing thrown) and safe quoting of names read
// from files into error messages. JSON from model files is hostile input
// (reliability.md §1.1 "deeply nested JSON", §1.4 rule 3).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace anymoe {

struct JsonLimits {
  int max_depth = 64;  // containers nested deeper than this are rejected mid-parse
  bool reject_duplicate_keys = true;
};

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
