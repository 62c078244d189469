// Reading the fields of a request body (nlohmann::ordered_json, keys in the
// client's order) with errors that name the field: shared by the chat,
// Anthropic Messages and Responses request readers.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace anymoe {

#define RETURN_IF_API_ERROR(expr)                       \
  do {                                                  \
    if (std::optional<ApiError> _e = (expr)) return _e; \
  } while (0)

// A field that is absent or null counts as not given: null (also when
// `object` is not an object).
const nlohmann::ordered_json* Field(const nlohmann::ordered_json& object, const char* name);
const nlohmann::json* Field(const nlohmann::json& object, const char* name);

// An array field (`messages`, `tools`) of at most `max_items` items into
// `*out` (null when absent and not `required`). A required one must be there
// and hold at least one item. Errors name the field.
std::optional<ApiError> ReadArray(const nlohmann::ordered_json& object, const char* key,
                                  size_t max_items, bool required,
                                  const nlohmann::ordered_json** out);

// A string field into `out` (left as is when absent unless `required`);
// `param` is the name errors give.
std::optional<ApiError> ReadString(const nlohmann::ordered_json& object, const char* key,
                                   const std::string& param, std::string* out,
                                   bool required = false);

// A string, or an array of {"type": one of `types`, "text"} parts joined.
std::optional<ApiError> ReadTextParts(const nlohmann::ordered_json& v, const std::string& name,
                                      std::initializer_list<std::string_view> types,
                                      std::string* out);

// "name[i]".
std::string Indexed(const std::string& name, size_t i);

}  // namespace anymoe
