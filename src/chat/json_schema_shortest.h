// Whole-graph passes over a compiled schema (json_schema.h), run once every
// node exists, because $ref cycles make a node's children known only then:
// the shortest valid value of each node (a fixpoint, since recursive
// references have no bottom-up order), the frames it needs, and the
// structural disjointness that lets oneOf be generated as anyOf.
#pragma once

#include <string>
#include <vector>

#include "chat/json_schema.h"
#include "core/status.h"

namespace anymoe {

// Fills min_bytes, shortest and min_frames; refuses a union that contains
// itself without nesting, a recursion with no finite value, a shortest value
// over 1 MiB and a schema nested beyond kMaxJsonNesting. `paths` names each
// node's place in the schema for the messages.
Status FinishSchema(CompiledSchema* schema, const std::vector<std::string>& paths);

// True only when no JSON value can match both nodes (checked structurally,
// `depth` bounds the descent into objects).
bool Disjoint(const CompiledSchema& schema, int32_t a, int32_t b, int depth);

}  // namespace anymoe
