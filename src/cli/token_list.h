// "1,2,3" <-> token ids, for --prompt-tokens and --print-tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe::cli {

// Parses comma-separated ids, each in [0, vocab_size).
Expected<std::vector<int32_t>> ParseTokenList(std::string_view text, size_t vocab_size);
std::string FormatTokenList(std::span<const int32_t> ids);

}  // namespace anymoe::cli
