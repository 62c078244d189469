// `anymoe bench --json-schema FILE`: the cost of constrained decoding's mask
// per decode step on a model's vocabulary, and the automaton's memory.
#pragma once

#include <string>

#include "core/status.h"

namespace anymoe {
class Engine;
}

namespace anymoe::cli {

// Walks `steps` tokens (a seeded "model" choosing uniformly among the
// allowed ones) `walks` times: the first walk computes masks, later ones
// find them cached. Prints one markdown line per pass.
Status ReportJsonSchemaMaskCost(const Engine& engine, const std::string& schema_file, int64_t steps, int walks);

}  // namespace anymoe::cli
