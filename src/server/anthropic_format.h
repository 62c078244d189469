// Anthropic Messages responses: the whole message ({id, type: "message",
// role, content blocks, stop_reason, stop_sequence, usage}) and its stream
// (message_start, content_block_start / _delta / _stop with thinking_delta,
// text_delta and input_json_delta, message_delta, message_stop, ping), built
// from ChatOutput's deltas: each OutputParts part (chat_encoder.h) is a
// block with the next index.
#pragma once

#include <string>

#include "server/chat_encoder.h"

namespace anymoe {

class AnthropicEncoder : public ChatEncoder, private OutputParts::Sink {
 public:
  AnthropicEncoder(std::string id, std::string model);

  std::string Open(const Usage& usage) override;
  std::string Delta(const ChatDelta& delta) override;
  std::string Close(const ChatFinish& finish) override;
  nlohmann::json Body(const ChatFinish& finish) const override;
  std::string StreamError(const ApiError& error) const override;
  std::string_view Ping() const override;

 private:
  // OutputParts::Sink: a part is a content block.
  void OpenPart(OutputParts::Kind kind, const ToolCallDelta* call) override;
  void AppendToPart(std::string_view text) override;
  void ClosePart() override;

  std::string id_, model_;
  OutputParts parts_;
  nlohmann::json content_ = nlohmann::json::array();  // the blocks so far
  std::string tool_input_;  // the open tool_use block's input JSON, raw
  bool used_tools_ = false;
  std::string events_;      // SSE events of the current call
};

// Anthropic's stop_reason: end_turn, max_tokens, stop_sequence, tool_use.
std::string_view AnthropicStopReason(const ChatFinish& finish, bool has_tool_use);
// usage {input_tokens (those not read from the cache), output_tokens,
// cache_read_input_tokens, cache_creation_input_tokens}.
nlohmann::json AnthropicUsage(const Usage& usage);
// {"type": "error", "error": {"type": "invalid_request_error", "message"}}:
// the error type follows the status as Anthropic's API types it.
nlohmann::json AnthropicErrorValue(const ApiError& error);

}  // namespace anymoe
