// API-key checks: the key comes as "Authorization: Bearer K" or "X-Api-Key: K"
// and is compared in constant time, so response timing does not reveal how
// many leading bytes of a guess were right.
#pragma once

#include <string>
#include <string_view>

namespace anymoe {

// True when a == b; the time taken depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The key a client presented: the Bearer token of `authorization` if it has
// one, else `x_api_key`; "" when neither.
std::string_view PresentedApiKey(std::string_view authorization, std::string_view x_api_key);

}  // namespace anymoe
