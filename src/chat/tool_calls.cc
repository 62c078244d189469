// Tool-call parsing as a resumable state machine over the text not yet
// decided (buf_): each state consumes what it can decide and otherwise waits
// for more text, so streaming in any chunking reaches the same decisions as
// parsing the whole text. Argument values of GLM calls are raw text, JSON-decoded
// unless the tool's schema says the parameter is a string (as vLLM's glm45
// parser does); arguments are re-serialised with Python's json.dumps spacing.
#include "chat/tool_calls.h"

#include <array>

#include "chat/jinja/python_text.h"
#include "chat/model_chat_template.h"
#include "chat/stream_markers.h"

namespace anymoe {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kArgKey = "<arg_key>";
constexpr std::string_view kArgKeyEnd = "</arg_key>";
constexpr std::string_view kArgValue = "<arg_value>";
constexpr std::string_view kArgValueEnd = "</arg_value>";
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
constexpr std::string_view kPythonTag = "<|python_tag|>";


std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsLayoutSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsLayoutSpace(s.back())) s.remove_suffix(1);
  return s;
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsLayoutSpace(s[i])) ++i;
  return i;
}


bool IsPrefixOf(std::string_view s, std::string_view marker) {
  return s.size() < marker.size() && marker.substr(0, s.size()) == s;
}

// End (one past) of the JSON object starting at s[0] == '{', or npos while
// unterminated; strings and escapes respected.
size_t JsonObjectEnd(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string ArgumentsText(const Json& args) {
  if (args.is_string()) {
    const Json parsed = ParseJsonLimited(args.get<std::string>());
    return parsed.is_object() ? PythonJsonDumps(parsed) : args.get<std::string>();
  }
  if (args.is_null()) return "{}";
  return PythonJsonDumps(args);
}

}  // namespace

Json ParseJsonLimited(std::string_view text, int max_depth) {
  int depth = 0, max_seen = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_seen = std::max(max_seen, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  if (max_seen > max_depth) return Json(Json::value_t::discarded);
  return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

std::string PythonJsonDumps(const Json& value) {
  auto v = JsonToTemplateValue(value, false);
  if (!v.ok()) return value.dump();
  try {
    return jinja::PyJsonDumps(*v, {});
  } catch (const jinja::JinjaError&) {
    return value.dump();
  }
}

std::string_view ToolCallDialectName(ToolCallDialect d) {
  switch (d) {
    case ToolCallDialect::kNone: return "none";
    case ToolCallDialect::kGlm45: return "glm45";
    case ToolCallDialect::kGlm47: return "glm47";
    case ToolCallDialect::kHermes: return "hermes";
    case ToolCallDialect::kLlama3Json: return "llama3_json";
    case ToolCallDialect::kDeepSeekV3: return "deepseek_v3";
  }
  return "none";
}

Expected<ToolCallDialect> ToolCallDialectFromName(std::string_view name) {
  for (ToolCallDialect d : {ToolCallDialect::kNone, ToolCallDialect::kGlm45, ToolCallDialect::kGlm47,
                            ToolCallDialect::kHermes, ToolCallDialect::kLlama3Json,
                            ToolCallDialect::kDeepSeekV3}) {
    if (ToolCallDialectName(d) == name) return d;
  }
  return Status::Error("unknown tool-call dialect '" + std::string(name) +
                       "'; known: none, glm45, glm47, hermes, llama3_json, deepseek_v3");
}

ToolCallDialect DetectToolCallDialect(std::string_view src) {
  const auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<arg_key>")) {
    return has("<tool_call>{function-name}\n") ? ToolCallDialect::kGlm45 : ToolCallDialect::kGlm47;
  }
  if (has(kDsCallBegin)) return ToolCallDialect::kDeepSeekV3;
  if (has("<tool_call>")) return ToolCallDialect::kHermes;
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) {
    return ToolCallDialect::kLlama3Json;
  }
  return ToolCallDialect::kNone;
}

ToolCallParser::ToolCallParser(ToolCallDialect dialect, Json tools, std::string id_prefix)
    : dialect_(dialect), tools_(std::move(tools)), id_prefix_(std::move(id_prefix)) {
  if (dialect_ == ToolCallDialect::kLlama3Json) state_ = State::kLlamaStart;
  if (dialect_ == ToolCallDialect::kNone) state_ = State::kPlain;
}

ToolCallOutput ToolCallParser::Feed(std::string_view text) {
  ToolCallOutput out;
  buf_ += text;
  while (Step(false, &out)) {
  }
  return out;
}

ToolCallOutput ToolCallParser::Finish() {
  ToolCallOutput out;
  while (Step(true, &out)) {
  }
  if (call_open_) EndCall(&out);
  EmitContent(buf_, &out);
  buf_.clear();
  pending_space_.clear();
  return out;
}

void ToolCallParser::EmitContent(std::string_view text, ToolCallOutput* out) {
  if (text.empty()) return;
  if (after_call_) {
    // Whitespace between or after calls is layout, not content.
    size_t i = 0;
    while (i < text.size() && IsLayoutSpace(text[i])) ++i;
    pending_space_.append(text.substr(0, i));
    text.remove_prefix(i);
    if (text.empty()) return;
    after_call_ = false;
    out->content += pending_space_;
    pending_space_.clear();
  }
  out->content.append(text);
}

void ToolCallParser::BeginCall(std::string name, ToolCallOutput* out) {
  pending_space_.clear();
  ToolCall call;
  call.id = "call_" + id_prefix_ + std::to_string(calls_.size());
  call.name = std::move(name);
  ToolCallDelta d;
  d.index = calls_.size();
  d.id = call.id;
  d.name = call.name;
  out->deltas.push_back(d);
  calls_.push_back(std::move(call));
  call_open_ = true;
  args_in_call_ = 0;
}

void ToolCallParser::AppendArguments(const std::string& text, ToolCallOutput* out) {
  calls_.back().arguments += text;
  if (!out->deltas.empty() && out->deltas.back().index == calls_.size() - 1) {
    out->deltas.back().arguments += text;
  } else {
    ToolCallDelta d;
    d.index = calls_.size() - 1;
    d.arguments = text;
    out->deltas.push_back(std::move(d));
  }
}

void ToolCallParser::EndCall(ToolCallOutput* out) {
  if (dialect_ == ToolCallDialect::kGlm45 || dialect_ == ToolCallDialect::kGlm47) {
    AppendArguments(args_in_call_ == 0 ? "{}" : "}", out);
  }
  call_open_ = false;
  after_call_ = true;
}

void ToolCallParser::AddWholeCall(std::string name, std::string arguments, ToolCallOutput* out) {
  BeginCall(std::move(name), out);
  AppendArguments(arguments, out);
  EndCall(out);
}

std::string ToolCallParser::TypedGlmValue(const std::string& key, const std::string& raw) const {
  bool is_string = false;
  if (tools_.is_array()) {
    for (const Json& t : tools_) {
      const Json& f = t.contains("function") ? t["function"] : t;
      if (!f.is_object() || f.value("name", "") != calls_.back().name) continue;
      const Json* props = nullptr;
      if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties")) {
        props = &f["parameters"]["properties"];
      }
      if (props && props->is_object() && props->contains(key) && (*props)[key].is_object()) {
        const Json& type = (*props)[key].value("type", Json());
        is_string = type.is_string() && type.get<std::string>() == "string";
      }
    }
  }
  if (!is_string) {
    const Json parsed = ParseJsonLimited(raw);
    if (!parsed.is_discarded()) return PythonJsonDumps(parsed);
  }
  return PythonJsonDumps(Json(raw));
}

bool ToolCallParser::Step(bool final, ToolCallOutput* out) {
  switch (state_) {
    case State::kText: return StepText(final, out);
    case State::kGlmName: return StepGlmName(final, out);
    case State::kGlmArgs: return StepGlmArgs(final, out);
    case State::kHermesBody: return StepHermes(final, out);
    case State::kDsCalls: return StepDeepSeek(final, out);
    case State::kLlamaStart: return StepLlamaStart(final, out);
    case State::kLlamaJson: return StepLlamaJson(final, out);
    case State::kPlain:
      EmitContent(buf_, out);
      buf_.clear();
      return false;
  }
  return false;
}

bool ToolCallParser::StepText(bool final, ToolCallOutput* out) {
  const std::string_view open = dialect_ == ToolCallDialect::kDeepSeekV3 ? kDsCallsBegin : kToolCallOpen;
  const size_t hit = buf_.find(open);
  if (hit == std::string::npos) {
    const size_t keep = final ? 0 : PartialMarkerSuffix(buf_, open);
    EmitContent(std::string_view(buf_).substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  EmitContent(std::string_view(buf_).substr(0, hit), out);
  buf_.erase(0, hit + open.size());
  pending_space_.clear();
  switch (dialect_) {
    case ToolCallDialect::kGlm45:
    case ToolCallDialect::kGlm47: state_ = State::kGlmName; break;
    case ToolCallDialect::kHermes: state_ = State::kHermesBody; break;
    default: state_ = State::kDsCalls; break;
  }
  return true;
}

bool ToolCallParser::StepGlmName(bool final, ToolCallOutput* out) {
  size_t end = std::string::npos;
  for (std::string_view m : {std::string_view("\n"), kArgKey, kToolCallClose}) {
    end = std::min(end, buf_.find(m));
  }
  if (end == std::string::npos) {
    if (!final) return false;
    end = buf_.size();
  }
  BeginCall(std::string(Strip(std::string_view(buf_).substr(0, end))), out);
  buf_.erase(0, end);
  state_ = State::kGlmArgs;
  return true;
}

bool ToolCallParser::StepGlmArgs(bool final, ToolCallOutput* out) {
  const size_t i = SkipSpace(buf_, 0);
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (rest.substr(0, kToolCallClose.size()) == kToolCallClose) {
    buf_.erase(0, i + kToolCallClose.size());
    EndCall(out);
    state_ = State::kText;
    return true;
  }
  if (rest.substr(0, kArgKey.size()) == kArgKey) {
    const size_t key_end = rest.find(kArgKeyEnd);
    if (key_end == std::string_view::npos) return false;
    const size_t v = SkipSpace(rest, key_end + kArgKeyEnd.size());
    if (v == rest.size() || IsPrefixOf(rest.substr(v), kArgValue)) return false;
    if (rest.substr(v, kArgValue.size()) != kArgValue) {  // a key without a value: skip it
      buf_.erase(0, i + v);
      return true;
    }
    const size_t value_end = rest.find(kArgValueEnd, v);
    if (value_end == std::string_view::npos) return false;
    const std::string key(rest.substr(kArgKey.size(), key_end - kArgKey.size()));
    const std::string value(rest.substr(v + kArgValue.size(), value_end - v - kArgValue.size()));
    std::string fragment = args_in_call_++ == 0 ? "{" : ", ";
    fragment += PythonJsonDumps(Json(key)) + ": " + TypedGlmValue(key, value);
    AppendArguments(fragment, out);
    buf_.erase(0, i + value_end + kArgValueEnd.size());
    return true;
  }
  if (rest.empty()) return false;  // wait (at the end, Finish closes the call)
  if (!final && (IsPrefixOf(rest, kToolCallClose) || IsPrefixOf(rest, kArgKey))) return false;
  // Anything else inside a call is not GLM's syntax: drop it up to the next tag.
  const size_t next = rest.find('<', 1);
  if (next == std::string_view::npos) {
    if (final) buf_.clear();
    return false;
  }
  buf_.erase(0, i + next);
  return true;
}

bool ToolCallParser::StepHermes(bool final, ToolCallOutput* out) {
  const size_t close = buf_.find(kToolCallClose);
  if (close == std::string::npos && !final) return false;
  const std::string body(Strip(std::string_view(buf_).substr(0, close == std::string::npos ? buf_.size() : close)));
  const Json j = ParseJsonLimited(body);
  if (j.is_object() && j.contains("name") && j["name"].is_string()) {
    const Json args = j.contains("arguments") ? j["arguments"] : j.value("parameters", Json());
    AddWholeCall(j["name"].get<std::string>(), ArgumentsText(args), out);
  } else {
    EmitContent(std::string(kToolCallOpen) + buf_.substr(0, close == std::string::npos ? buf_.size() : close + kToolCallClose.size()), out);
  }
  buf_.erase(0, close == std::string::npos ? buf_.size() : close + kToolCallClose.size());
  state_ = State::kText;
  return true;
}

bool ToolCallParser::StepDeepSeek(bool final, ToolCallOutput* out) {
  const size_t i = SkipSpace(buf_, 0);
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (rest.substr(0, kDsCallsEnd.size()) == kDsCallsEnd) {
    buf_.erase(0, i + kDsCallsEnd.size());
    state_ = State::kText;
    return true;
  }
  if (rest.substr(0, kDsCallBegin.size()) == kDsCallBegin) {
    const size_t end = rest.find(kDsCallEnd);
    if (end == std::string_view::npos) {
      if (!final) return false;
    }
    const std::string_view body = rest.substr(kDsCallBegin.size(), (end == std::string_view::npos ? rest.size() : end) - kDsCallBegin.size());
    const size_t sep = body.find(kDsSep);
    std::string name, args;
    if (sep != std::string_view::npos) {
      const std::string_view head = Strip(body.substr(0, sep));
      std::string_view tail = body.substr(sep + kDsSep.size());
      if (head == "function") {  // V3: function<sep>NAME\n```json\nARGS\n```
        const size_t nl = tail.find('\n');
        name = std::string(Strip(tail.substr(0, nl)));
        tail = nl == std::string_view::npos ? std::string_view() : tail.substr(nl + 1);
        tail = Strip(tail);
        if (tail.substr(0, 7) == "```json") tail.remove_prefix(7);
        if (tail.size() >= 3 && tail.substr(tail.size() - 3) == "```") tail.remove_suffix(3);
      } else {  // V3.1: NAME<sep>ARGS
        name = std::string(head);
      }
      args = std::string(Strip(tail));
    } else {
      name = std::string(Strip(body));
    }
    const Json parsed = ParseJsonLimited(args);
    AddWholeCall(std::move(name), parsed.is_object() ? PythonJsonDumps(parsed) : (args.empty() ? "{}" : args), out);
    buf_.erase(0, end == std::string_view::npos ? buf_.size() : i + end + kDsCallEnd.size());
    return true;
  }
  if (!final && (rest.empty() || IsPrefixOf(rest, kDsCallsEnd) || IsPrefixOf(rest, kDsCallBegin))) return false;
  if (rest.empty()) return false;
  state_ = State::kText;  // not a call: the rest is text again
  return true;
}

bool ToolCallParser::StepLlamaStart(bool final, ToolCallOutput* out) {
  const size_t i = SkipSpace(buf_, 0);
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (rest.substr(0, kPythonTag.size()) == kPythonTag) {
    buf_.erase(0, i + kPythonTag.size());
    state_ = State::kLlamaJson;
    return true;
  }
  if (!rest.empty() && rest[0] == '{') {
    buf_.erase(0, i);
    state_ = State::kLlamaJson;
    return true;
  }
  if (!final && (rest.empty() || IsPrefixOf(rest, kPythonTag))) return false;
  state_ = State::kPlain;
  return true;
}

bool ToolCallParser::StepLlamaJson(bool final, ToolCallOutput* out) {
  size_t i = SkipSpace(buf_, 0);
  if (i < buf_.size() && buf_[i] == ';') i = SkipSpace(buf_, i + 1);
  const std::string_view rest = std::string_view(buf_).substr(i);
  if (rest.empty()) {
    if (final) buf_.clear();
    return false;
  }
  if (rest[0] != '{') {
    buf_.erase(0, i);
    after_call_ = false;
    state_ = State::kPlain;
    return true;
  }
  const size_t end = JsonObjectEnd(rest);
  if (end == std::string_view::npos) {
    if (!final) return false;
    state_ = State::kPlain;
    return true;
  }
  const Json j = ParseJsonLimited(rest.substr(0, end));
  if (!(j.is_object() && j.contains("name") && j["name"].is_string() &&
        (j.contains("parameters") || j.contains("arguments")))) {
    buf_.erase(0, i);
    state_ = State::kPlain;
    return true;
  }
  AddWholeCall(j["name"].get<std::string>(),
               ArgumentsText(j.contains("parameters") ? j["parameters"] : j["arguments"]), out);
  buf_.erase(0, i + end);
  return true;
}

ParsedToolCalls ParseToolCalls(ToolCallDialect dialect, std::string_view text, const Json& tools,
                               const std::string& id_prefix) {
  ToolCallParser p(dialect, tools, id_prefix);
  ParsedToolCalls r;
  r.content = p.Feed(text).content;
  r.content += p.Finish().content;
  r.calls = p.calls();
  return r;
}

}  // namespace anymoe
