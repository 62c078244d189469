// Pre-tokenizers: split text into the pieces that BPE encodes independently.
// Each rule set is an explicit, non-recursive scanner that splits byte-identically
// to the regex the model's HF tokenizer.json uses (no std::regex: it recurses per
// character and overflows the stack on long single-class runs).
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

enum class PreTokenizerKind {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama-3, GLM-4/4.5/4.7)
  kLlama3,
  // As kLlama3 with \p{N} (one digit per piece)              (Qwen2, Qwen2.5)
  kQwen2,
  // HF Digits(individual_digits) then the kGpt2 regex        (SmolLM2, StarCoder)
  kSmolLm2,
  // [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
  //  [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|...)?|(the same, + then *)|
  //  \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Kimi K2 / K2.5)
  kKimiK2,
  // Not a scanner: the model's pre-tokenizer has regex stages
  // (pre_tokenizer_pipeline.h); PreTokenize returns the text whole.
  kRegex,
};

std::string_view PreTokenizerName(PreTokenizerKind kind);

// The exact Split regex text of the HF tokenizer.json for kLlama3 / kQwen2,
// and Kimi's pat_str (its parts joined by '|') for kKimiK2.
std::string_view Llama3SplitRegex();
std::string_view Qwen2SplitRegex();
// (constexpr: the GGUF name table of pre_tokenizer_pipeline.cc holds it.)
constexpr std::string_view KimiK2SplitRegex() {
  return R"re([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

// Appends the pieces of `text` to `pieces`, in order; they cover `text` exactly
// and view into it. Any bytes (invalid UTF-8 included) are accepted; time and
// memory are linear in the text length.
void PreTokenize(PreTokenizerKind kind, std::string_view text,
                 std::vector<std::string_view>* pieces);

}  // namespace anymoe
