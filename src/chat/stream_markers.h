// Helpers the streaming parsers share: a marker that may continue in the next
// chunk must be held back, and JSON-style whitespace.
#pragma once

#include <algorithm>
#include <string_view>

namespace anymoe {

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
inline size_t PartialMarkerSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

inline bool IsLayoutSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace anymoe
