#include "server/chat_output.h"

namespace anymoe {

using json = nlohmann::json;

ChatOutput::ChatOutput(Options options) : options_(std::move(options)) {
  if (options_.split_reasoning) reasoning_parser_.emplace(options_.starts_in_reasoning);
  if (options_.mode == Mode::kToolsAuto && options_.dialect != ToolCallDialect::kNone) {
    tool_parser_.emplace(options_.dialect, options_.tools, options_.id_prefix);
  }
}

void ChatOutput::Record(const ChatDelta& d) {
  reasoning_ += d.reasoning;
  content_ += d.content;
  for (const ToolCallDelta& t : d.tool_calls) {
    if (t.index >= calls_.size()) calls_.push_back({t.id, t.name, ""});
    calls_[t.index].arguments += t.arguments;
  }
}

ChatDelta ChatOutput::FromContent(std::string_view text, bool final) {
  ChatDelta d;
  if (!tool_parser_) {
    d.content = text;
    return d;
  }
  ToolCallOutput t = tool_parser_->Feed(text);
  d.content = std::move(t.content);
  d.tool_calls = std::move(t.deltas);
  if (final) {
    ToolCallOutput rest = tool_parser_->Finish();
    d.content += rest.content;
    for (ToolCallDelta& x : rest.deltas) d.tool_calls.push_back(std::move(x));
  }
  return d;
}

void ChatOutput::ScanCallArray(std::string_view text, ChatDelta* out) {
  auto args = [&](char c) {
    if (out->tool_calls.empty() || !out->tool_calls.back().id.empty() ||
        out->tool_calls.back().index != calls_.size() - 1) {
      out->tool_calls.push_back({calls_.size() - 1, "", "", ""});
    }
    out->tool_calls.back().arguments += c;
  };
  for (char c : text) {
    if (in_arguments_) {
      // The arguments value, raw, up to its closing brace.
      if (!in_string_) {
        if (c == '{' || c == '[') ++depth_;
        if (c == '}' || c == ']') --depth_;
        if (c == '"') in_string_ = true;
      } else if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      if (!calls_.empty()) args(c);
      if (depth_ == arguments_depth_) in_arguments_ = false;
      continue;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        const nlohmann::ordered_json s = ParseJsonLimited("\"" + token_ + "\"", 1);
        const std::string value = s.is_string() ? s.get<std::string>() : "";
        if (!reading_value_) {
          key_ = value;
        } else if (depth_ == 2 && key_ == "name") {
          const size_t index = calls_.size();
          ToolCallDelta begin{index, "call_" + options_.id_prefix + std::to_string(index), value,
                              ""};
          calls_.push_back({begin.id, begin.name, ""});
          out->tool_calls.push_back(std::move(begin));
        }
        continue;
      }
      token_ += c;
      continue;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        token_.clear();
        break;
      case ':':
        if (depth_ == 2) reading_value_ = true;
        break;
      case ',':
        if (depth_ == 2) reading_value_ = false;
        break;
      case '{':
      case '[':
        if (depth_ == 2 && reading_value_ && key_ == "arguments" && c == '{') {
          arguments_depth_ = depth_;
          ++depth_;
          in_arguments_ = true;
          if (!calls_.empty()) args(c);
          break;
        }
        ++depth_;
        if (depth_ == 2) reading_value_ = false, key_.clear();
        break;
      case '}':
      case ']':
        --depth_;
        break;
      default:
        break;  // whitespace, numbers and literals of other keys
    }
  }
}

ChatDelta ChatOutput::Feed(std::string_view text) {
  ChatDelta d;
  switch (options_.mode) {
    case Mode::kToolFunction:
      if (calls_.empty()) {
        d.tool_calls.push_back({0, "call_" + options_.id_prefix + "0", options_.function, ""});
        calls_.push_back({d.tool_calls[0].id, options_.function, ""});
      }
      if (!text.empty()) {
        d.tool_calls.push_back({0, "", "", std::string(text)});
        calls_[0].arguments += text;
      }
      return d;
    case Mode::kToolRequired:
      ScanCallArray(text, &d);
      for (const ToolCallDelta& t : d.tool_calls) {
        if (t.id.empty()) calls_[t.index].arguments += t.arguments;
      }
      return d;
    case Mode::kText:
    case Mode::kToolsAuto:
      break;
  }
  if (reasoning_parser_) {
    ReasoningOutput r = reasoning_parser_->Feed(text);
    d = FromContent(r.content, false);
    d.reasoning = std::move(r.reasoning);
  } else {
    d = FromContent(text, false);
  }
  Record(d);
  return d;
}

ChatDelta ChatOutput::Finish() {
  ChatDelta d;
  if (options_.mode == Mode::kToolFunction) {
    if (calls_.empty()) return Feed("");
    return d;
  }
  if (options_.mode == Mode::kToolRequired) return d;
  if (reasoning_parser_) {
    ReasoningOutput r = reasoning_parser_->Finish();
    d = FromContent(r.content, true);
    d.reasoning = std::move(r.reasoning);
  } else {
    d = FromContent("", true);
  }
  Record(d);
  return d;
}

json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

json ChatMessageJson(const ChatOutput& output) {
  json m = {{"role", "assistant"}};
  // OpenAI sends null content beside tool calls when there is no text.
  m["content"] = output.content().empty() && !output.calls().empty() ? json(nullptr)
                                                                      : json(output.content());
  if (!output.reasoning().empty()) m["reasoning_content"] = output.reasoning();
  if (!output.calls().empty()) m["tool_calls"] = ToolCallsJson(output.calls());
  return m;
}

json ChatDeltaJson(const ChatDelta& d) {
  json delta = json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallDelta& t : d.tool_calls) {
      // A call opens with its id and name alone; argument text follows in
      // items of its own, even when the parser had both at once.
      if (!t.id.empty()) {
        calls.push_back({{"index", t.index},
                         {"id", t.id},
                         {"type", "function"},
                         {"function", {{"name", t.name}, {"arguments", ""}}}});
        if (t.arguments.empty()) continue;
      }
      calls.push_back({{"index", t.index}, {"function", {{"arguments", t.arguments}}}});
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

}  // namespace anymoe
