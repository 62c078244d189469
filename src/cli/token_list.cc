#include "cli/token_list.h"

#include <charconv>

namespace anymoe::cli {

Expected<std::vector<int32_t>> ParseTokenList(std::string_view text, size_t vocab_size) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int64_t id = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      return Status::Error("--prompt-tokens: '" + std::string(item) + "' is not a token id");
    }
    if (id < 0 || uint64_t(id) >= vocab_size) {
      return Status::Error("--prompt-tokens: token id " + std::to_string(id) +
                           " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    ids.push_back(int32_t(id));
    pos = comma + 1;
  }
  return ids;
}

std::string FormatTokenList(std::span<const int32_t> ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

}  // namespace anymoe::cli
