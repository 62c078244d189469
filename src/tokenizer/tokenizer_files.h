// Finding a tokenizer on disk without loading a model: a GGUF file (a full model
// or a vocabulary-only one, with no tensors) or a folder holding tokenizer.json
// (and, if present, tokenizer_config.json). `anymoe tokenize` and the engine's
// folder case use it.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {

// tokenizer.json (+ tokenizer_config.json when present) of an HF folder.
Expected<std::unique_ptr<Tokenizer>> TokenizerFromFolder(const std::string& dir);

// A folder as above, else a GGUF file's tokenizer.ggml.* metadata.
Expected<std::unique_ptr<Tokenizer>> TokenizerFromPath(const std::string& path);

}  // namespace anymoe
