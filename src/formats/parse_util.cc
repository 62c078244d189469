// Strict JSON parsing on top of nlohmann::json's SAX parser: JsonDomBuilder
// places every value once (linear time; the callback parser's per-value
// rescans of the parent made hostile documents quadratic), checks the depth
// when a container opens and duplicate keys through the object's own lookup,
// and turns the parser's errors into lines without input bytes.
#include "formats/parse_util.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>

#include "core/mapped_file.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

// Printable copy of a message, cut to a line.
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

// nlohmann's parse errors read "[json.exception.parse_error.101] parse error at
// line L, column C: syntax error while parsing value - invalid literal; last
// read: '<input>'; expected ...". Keeps the reason, drops the echoed input.
std::string ParseErrorReason(const nlohmann::detail::exception& ex, const std::string& last_token) {
  if (ex.id == 406) return "number out of range";
  std::string what = ex.what();
  if (const size_t colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
  const std::string echoed = "; last read: '" + last_token + "'";
  if (const size_t at = what.find(echoed); at != std::string::npos) what.erase(at, echoed.size());
  return SanitizeMessage(what);
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

// ---- JsonDomBuilder ----------------------------------------------------------

void JsonDomBuilder::StreamChildren(std::vector<std::string> path, Sink sink) {
  stream_depth_ = std::max(stream_depth_, path.size());
  streams_.push_back({std::move(path), std::move(sink)});
}

bool JsonDomBuilder::Fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return false;
}

bool JsonDomBuilder::Deliver(Level& level) {
  const bool ok = level.stream->sink(level.key, level.index++, std::move(level.slot));
  level.slot = nullptr;
  if (!ok && error_.empty()) error_ = "rejected by the reader";
  return ok;
}

bool JsonDomBuilder::Count(bool container) {
  if (limits_.max_values != 0 && ++values_ > limits_.max_values) {
    return Fail("more than " + std::to_string(limits_.max_values) + " JSON values");
  }
  if (container && limits_.max_containers != 0 && ++containers_ > limits_.max_containers) {
    return Fail("more than " + std::to_string(limits_.max_containers) +
                " JSON objects and arrays");
  }
  return true;
}

template <typename Value>
bool JsonDomBuilder::Put(Value&& v) {
  if (!Count(false)) return false;
  if (stack_.empty()) {
    root_ = json(std::forward<Value>(v));
    return true;
  }
  Level& parent = stack_.back();
  if (parent.stream != nullptr) {
    parent.slot = json(std::forward<Value>(v));
    return Deliver(parent);
  }
  if (parent.value->is_array()) {
    parent.value->get_ref<json::array_t&>().emplace_back(std::forward<Value>(v));
  } else {
    *next_member_ = json(std::forward<Value>(v));
  }
  return true;
}

bool JsonDomBuilder::null() { return Put(nullptr); }
bool JsonDomBuilder::boolean(bool val) { return Put(val); }
bool JsonDomBuilder::number_integer(number_integer_t val) { return Put(val); }
bool JsonDomBuilder::number_unsigned(number_unsigned_t val) { return Put(val); }
bool JsonDomBuilder::number_float(number_float_t val, const string_t&) { return Put(val); }
bool JsonDomBuilder::string(string_t& val) { return Put(std::move(val)); }
bool JsonDomBuilder::binary(binary_t&) { return Fail("binary values are not JSON"); }

bool JsonDomBuilder::Open(json&& empty) {
  if (stack_.size() + 1 > size_t(limits_.max_depth)) {
    return Fail("JSON nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
  }
  if (!Count(true)) return false;
  json* slot;
  // An array's children have no name; an object's were named by the last key.
  const bool named =
      !stack_.empty() && (stack_.back().stream != nullptr ? stack_.back().value->is_object()
                                                          : !stack_.back().value->is_array());
  if (stack_.empty()) {
    root_ = std::move(empty);
    slot = &root_;
  } else {
    Level& parent = stack_.back();
    if (parent.stream != nullptr) {
      parent.slot = std::move(empty);
      slot = &parent.slot;
    } else if (parent.value->is_array()) {
      slot = &parent.value->get_ref<json::array_t&>().emplace_back(std::move(empty));
    } else {
      *next_member_ = std::move(empty);
      slot = next_member_;
    }
  }
  Level& level = stack_.emplace_back();
  level.value = slot;
  if (named && stack_.size() - 1 <= stream_depth_) level.name = std::move(next_name_);
  // Streamed here? The path is the names of the levels below the root.
  for (const Stream& s : streams_) {
    if (s.path.size() + 1 != stack_.size()) continue;
    bool match = true;
    for (size_t i = 0; i < s.path.size() && match; ++i) match = stack_[i + 1].name == s.path[i];
    if (match) level.stream = &s;
  }
  return true;
}

bool JsonDomBuilder::Close() {
  stack_.pop_back();
  if (!stack_.empty() && stack_.back().stream != nullptr) return Deliver(stack_.back());
  return true;
}

bool JsonDomBuilder::start_object(std::size_t) { return Open(json::object()); }
bool JsonDomBuilder::start_array(std::size_t) { return Open(json::array()); }
bool JsonDomBuilder::end_object() { return Close(); }
bool JsonDomBuilder::end_array() { return Close(); }

bool JsonDomBuilder::key(string_t& val) {
  Level& level = stack_.back();
  if (stack_.size() <= stream_depth_) next_name_ = val;  // may open a streamed path
  if (level.stream != nullptr) {
    level.key = std::move(val);
    next_member_ = &level.slot;
    return true;
  }
  json::object_t& object = level.value->get_ref<json::object_t&>();
  auto [it, inserted] = object.try_emplace(std::move(val), nullptr);
  if (!inserted) {
    if (limits_.reject_duplicate_keys) {
      return Fail(limits_.quote_keys_in_errors ? "duplicate JSON key " + QuoteName(it->first)
                                               : std::string("duplicate JSON key in an object"));
    }
    it->second = nullptr;  // the last one wins, as in HF tokenizers and nlohmann
  }
  next_member_ = &it->second;
  return true;
}

bool JsonDomBuilder::parse_error(std::size_t position, const std::string& last_token,
                                 const nlohmann::detail::exception& ex) {
  return Fail("invalid JSON at byte " + std::to_string(position) + ": " +
              ParseErrorReason(ex, last_token));
}

// ---- Entry points ------------------------------------------------------------

Status ParseJsonWith(std::string_view text, const std::string& name, JsonDomBuilder& builder) {
  try {
    const bool ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json,
                                    /*strict=*/true, /*ignore_comments=*/false);
    if (!ok) {
      return Status::Error(name + ": " +
                           (builder.error().empty() ? "invalid JSON" : builder.error()));
    }
  } catch (const std::bad_alloc&) {
    return Status::Error(name + ": out of memory while parsing JSON");
  } catch (const std::exception& e) {  // nothing in the SAX path should throw; never let it out
    return Status::Error(name + ": cannot parse JSON: " + SanitizeMessage(e.what()));
  }
  return Status::Ok();
}

Expected<nlohmann::json> ParseJsonStrict(std::string_view text, const std::string& name,
                                         const JsonLimits& limits) {
  JsonDomBuilder builder(limits);
  RETURN_IF_ERROR(ParseJsonWith(text, name, builder));
  return std::move(builder.root());
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
