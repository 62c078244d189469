#include "server/anthropic_format.h"

#include "server/sse.h"

namespace anymoe {

using json = nlohmann::json;

namespace {

// ChatOutput's "call_<suffix>" ids as Anthropic spells them.
std::string ToolUseId(const std::string& call_id) {
  return "toolu_" + (call_id.starts_with("call_") ? call_id.substr(5) : call_id);
}

}  // namespace

json ChatApiErrorValue(ChatApi api, const ApiError& error) {
  return api == ChatApi::kAnthropic ? AnthropicErrorValue(error) : ApiErrorValue(error);
}

json AnthropicErrorValue(const ApiError& error) {
  std::string type;
  switch (error.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503:
    case 529: type = "overloaded_error"; break;
    default: type = error.status >= 500 ? "api_error" : "invalid_request_error";
  }
  std::string message = error.message;
  if (!error.param.empty() && message.find(error.param) == std::string::npos) {
    message = error.param + ": " + message;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

std::string_view AnthropicStopReason(const ChatFinish& finish, bool has_tool_use) {
  switch (finish.reason) {
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
      return "max_tokens";
    case StopReason::kStopString:
      return "stop_sequence";
    case StopReason::kStopToken:
    case StopReason::kCancelled:
      break;
  }
  return has_tool_use ? "tool_use" : "end_turn";
}

json AnthropicUsage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

AnthropicEncoder::AnthropicEncoder(std::string id, std::string model)
    : id_(std::move(id)), model_(std::move(model)) {}

std::string AnthropicEncoder::Open(const Usage& usage) {
  json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", AnthropicUsage(usage)}};
  return SseEvent("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
         std::string(Ping());
}

void AnthropicEncoder::OpenPart(OutputParts::Kind kind, const ToolCallDelta* call) {
  json block;
  switch (kind) {
    case OutputParts::Kind::kReasoning:
      block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      break;
    case OutputParts::Kind::kToolCall:
      block = {{"type", "tool_use"},
               {"id", ToolUseId(call->id)},
               {"name", call->name},
               {"input", json::object()}};
      tool_input_.clear();
      used_tools_ = true;
      break;
    case OutputParts::Kind::kText:
    case OutputParts::Kind::kNone:
      block = {{"type", "text"}, {"text", ""}};
      break;
  }
  content_.push_back(block);
  events_ += SseEvent("content_block_start", {{"type", "content_block_start"},
                                              {"index", content_.size() - 1},
                                              {"content_block", std::move(block)}});
}

void AnthropicEncoder::AppendToPart(std::string_view text) {
  json& block = content_.back();
  json delta;
  if (block["type"] == "thinking") {
    block["thinking"] = block["thinking"].get<std::string>() + std::string(text);
    delta = {{"type", "thinking_delta"}, {"thinking", text}};
  } else if (block["type"] == "tool_use") {
    tool_input_ += text;
    delta = {{"type", "input_json_delta"}, {"partial_json", text}};
  } else {
    block["text"] = block["text"].get<std::string>() + std::string(text);
    delta = {{"type", "text_delta"}, {"text", text}};
  }
  events_ += SseEvent("content_block_delta", {{"type", "content_block_delta"},
                                              {"index", content_.size() - 1},
                                              {"delta", std::move(delta)}});
}

void AnthropicEncoder::ClosePart() {
  json& block = content_.back();
  if (block["type"] == "tool_use") {
    json input = json::parse(tool_input_, nullptr, /*allow_exceptions=*/false);
    // A call cut short (max_tokens) keeps what parses: nothing.
    block["input"] = input.is_object() ? input : json::object();
  }
  events_ += SseEvent("content_block_stop",
                      {{"type", "content_block_stop"}, {"index", content_.size() - 1}});
}

std::string AnthropicEncoder::Delta(const ChatDelta& d) {
  parts_.Feed(d, *this);
  return std::exchange(events_, std::string());
}

std::string AnthropicEncoder::Close(const ChatFinish& finish) {
  parts_.Finish(*this);
  std::string out = std::exchange(events_, std::string());
  json usage = AnthropicUsage(finish.usage);
  json delta = {{"stop_reason", AnthropicStopReason(finish, used_tools_)},
                {"stop_sequence", finish.stop_sequence.empty() ? json(nullptr)
                                                               : json(finish.stop_sequence)}};
  out += SseEvent("message_delta",
                  {{"type", "message_delta"}, {"delta", std::move(delta)}, {"usage", usage}});
  out += SseEvent("message_stop", {{"type", "message_stop"}});
  return out;
}

json AnthropicEncoder::Body(const ChatFinish& finish) const {
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", content_},
          {"stop_reason", AnthropicStopReason(finish, used_tools_)},
          {"stop_sequence",
           finish.stop_sequence.empty() ? json(nullptr) : json(finish.stop_sequence)},
          {"usage", AnthropicUsage(finish.usage)}};
}

std::string AnthropicEncoder::StreamError(const ApiError& error) const {
  return SseEvent("error", AnthropicErrorValue(error));
}

std::string_view AnthropicEncoder::Ping() const {
  return "event: ping\ndata: {\"type\": \"ping\"}\n\n";
}

}  // namespace anymoe
