// allOf as one schema: the keywords of two subschemas combined so that the
// result accepts exactly what both accept (bounds tightened, required lists
// joined, enums intersected, same-named properties and items merged in
// turn), or a named refusal where no single schema says the same (two
// different patterns or formats). anyOf / oneOf inside a part are
// distributed: A and anyOf(X, Y) is anyOf(A and X, A and Y).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/status.h"

namespace anymoe {

// `a` and `b` are schemas whose own top level holds no $ref (the caller
// resolves it); nested schemas may. Errors are "keyword 'X' at PATH: why".
Expected<nlohmann::ordered_json> MergeSchemas(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                                              const std::string& path);

// Whether `key` is an annotation: it never changes what validates.
bool IsSchemaAnnotation(const std::string& key);

}  // namespace anymoe
