// Strict JSON parsing on top of nlohmann::json's callback parser: the callback
// tracks container depth and the keys of each open object, and aborts the parse
// (by a private exception caught here) on the first violation.
#include "formats/parse_util.h"

#include <cstdio>
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/mapped_file.h"

namespace anymoe {
namespace {

struct JsonLimitHit {
  std::string message;
};

// Printable copy of an nlohmann error message, which may echo input bytes.
std::string SanitizeMessage(std::string_view s) {
  constexpr size_t kMaxChars = 240;
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < kMaxChars; ++i) {
    const unsigned char c = s[i];
    out += (c >= 0x20 && c < 0x7f) ? char(c) : '?';
  }
  if (out.size() >= kMaxChars) out += "...";
  return out;
}

}  // namespace

std::string QuoteName(std::string_view s) {
  constexpr size_t kMaxShown = 120;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const unsigned char c = s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "'";
}

Expected<nlohmann::json> ParseJsonStrict(std::string_view text, const std::string& name,
                                         const JsonLimits& limits) {
  using json = nlohmann::json;
  std::vector<std::unordered_set<std::string>> open_objects;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` counts the containers already open around this one.
        if (depth + 1 > limits.max_depth) {
          throw JsonLimitHit{"JSON nesting deeper than " + std::to_string(limits.max_depth) +
                             " levels"};
        }
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (limits.reject_duplicate_keys && !open_objects.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          throw JsonLimitHit{"duplicate JSON key " + QuoteName(parsed.get<std::string>())};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const JsonLimitHit& e) {
    return Status::Error(name + ": " + e.message);
  } catch (const json::exception& e) {
    return Status::Error(name + ": invalid JSON: " + SanitizeMessage(e.what()));
  } catch (const std::exception& e) {  // e.g. std::bad_alloc on a huge document
    return Status::Error(name + ": cannot parse JSON: " + SanitizeMessage(e.what()));
  }
}

Expected<nlohmann::json> ReadJsonFile(const std::string& path, uint64_t max_bytes,
                                      const JsonLimits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  if (file->size() > max_bytes) {
    return Status::Error(path + ": file is " + std::to_string(file->size()) + " bytes, over the " +
                         std::to_string(max_bytes) + "-byte limit");
  }
  const std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  return ParseJsonStrict(text, path, limits);
}

}  // namespace anymoe
