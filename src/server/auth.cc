#include "server/auth.h"

#include <cstdint>

namespace anymoe {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walk the longer input fully; a length mismatch is folded into the result.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = i < a.size() ? uint8_t(a[i]) : 0;
    const uint8_t y = i < b.size() ? uint8_t(b[i]) : 0;
    diff = diff | uint8_t(x ^ y);
  }
  return diff == 0;
}

std::string_view PresentedApiKey(std::string_view authorization, std::string_view x_api_key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size() && authorization.substr(0, kBearer.size()) == kBearer) {
    std::string_view token = authorization.substr(kBearer.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    return token;
  }
  return x_api_key;
}

}  // namespace anymoe
