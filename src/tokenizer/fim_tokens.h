// The fill-in-the-middle tokens of a code model's vocabulary (prefix, suffix,
// middle, and where the model has them the repository and file-separator
// tokens), found by the texts the model families that train FIM give them.
// llama-server's POST /infill builds its prompt from these; a vocabulary
// without the three core tokens cannot be asked to fill in the middle.
#pragma once

#include <cstdint>
#include <optional>

namespace anymoe {

class Tokenizer;

struct FimTokens {
  int32_t prefix = -1;
  int32_t suffix = -1;
  int32_t middle = -1;
  int32_t repo = -1;      // -1: none (then file context is plain text before the prefix)
  int32_t file_sep = -1;  // -1: none
};

// The FIM tokens of `tokenizer`, or nullopt when prefix, suffix or middle is
// missing. One family's set is taken whole (StarCoder / SmolLM
// "<fim_prefix>", Qwen2.5-Coder "<|fim_prefix|>", CodeLlama "<PRE>" /
// "▁<PRE>", DeepSeek-Coder "<｜fim▁begin｜>"), never a mix.
std::optional<FimTokens> FindFimTokens(const Tokenizer& tokenizer);

}  // namespace anymoe
