#include "tokenizer/fim_tokens.h"

#include <string_view>

#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

struct FimFamily {
  std::string_view prefix, suffix, middle, repo, file_sep;
};

// DeepSeek-Coder names its tokens after the hole: "begin" opens the prefix,
// "hole" is where the suffix starts and "end" asks for the middle.
constexpr FimFamily kFamilies[] = {
    {"<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<repo_name>", "<file_sep>"},
    {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"},
    {"<PRE>", "<SUF>", "<MID>", "", ""},
    {"\xE2\x96\x81<PRE>", "\xE2\x96\x81<SUF>", "\xE2\x96\x81<MID>", "", ""},
    {"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
     "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
     "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "", ""},
};

}  // namespace

std::optional<FimTokens> FindFimTokens(const Tokenizer& tokenizer) {
  const auto find = [&tokenizer](std::string_view text) {
    return text.empty() ? -1 : tokenizer.FindToken(text);
  };
  for (const FimFamily& f : kFamilies) {
    FimTokens t{find(f.prefix), find(f.suffix), find(f.middle), find(f.repo), find(f.file_sep)};
    if (t.prefix >= 0 && t.suffix >= 0 && t.middle >= 0) return t;
  }
  return std::nullopt;
}

}  // namespace anymoe
