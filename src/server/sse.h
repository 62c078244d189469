// JSON serialisation and Server-Sent Events framing for responses. Generated
// text may hold invalid UTF-8 (a model can stop mid code point), so every dump
// replaces bad bytes with U+FFFD instead of throwing (llama.cpp #9195, #11738).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace anymoe {

// Compact JSON; invalid UTF-8 in strings becomes U+FFFD. Never throws.
std::string DumpJson(const nlohmann::json& value);

// One SSE event: "data: <json>\n\n".
std::string SseData(const nlohmann::json& value);
// The end of an OpenAI stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// A comment line clients ignore; keeps proxies from closing an idle stream.
inline constexpr std::string_view kSsePing = ": ping\n\n";

}  // namespace anymoe
