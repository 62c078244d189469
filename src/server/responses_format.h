// OpenAI Responses API responses: the response object ({id, object:
// "response", status, output items, usage, the request's settings echoed})
// and its stream (response.created, response.in_progress,
// response.output_item.added / .done, response.content_part.added / .done,
// response.output_text.delta / .done, response.function_call_arguments.delta
// / .done, response.reasoning_text.delta / .done, response.completed or
// response.incomplete), each event with its sequence_number. Each OutputParts
// part (chat_encoder.h) is an output item: reasoning, message with one
// output_text part, or function_call with its call_id.
#pragma once

#include <cstdint>
#include <string>

#include "server/chat_encoder.h"

namespace anymoe {

class ResponsesEncoder : public ChatEncoder, private OutputParts::Sink {
 public:
  // `request`: the Responses request body, whose settings the response echoes.
  ResponsesEncoder(std::string id, std::string model, const nlohmann::ordered_json& request);

  std::string Open(const Usage& usage) override;
  std::string Delta(const ChatDelta& delta) override;
  std::string Close(const ChatFinish& finish) override;
  nlohmann::json Body(const ChatFinish& finish) const override;
  std::string StreamError(const ApiError& error) const override;
  std::string_view Ping() const override;

 private:
  void OpenPart(OutputParts::Kind kind, const ToolCallDelta* call) override;
  void AppendToPart(std::string_view text) override;
  void ClosePart() override;

  // The response object with `status` and the output so far.
  nlohmann::json Response(std::string_view status, const ChatFinish* finish) const;
  void Emit(const char* type, nlohmann::json event);
  // The open item's text: its output_text, arguments or reasoning_text.
  std::string& OpenText();

  std::string id_, model_;
  int64_t created_;
  nlohmann::json echo_;  // the request's settings
  OutputParts parts_;
  nlohmann::json output_ = nlohmann::json::array();
  int64_t sequence_ = 0;
  int64_t item_serial_ = 0;
  bool cut_short_ = false;  // closing the last item of a response cut at max_output_tokens
  std::string events_;
};

// usage {input_tokens, input_tokens_details.cached_tokens, output_tokens,
// output_tokens_details.reasoning_tokens (0: not counted apart), total_tokens}.
nlohmann::json ResponsesUsage(const Usage& usage);

}  // namespace anymoe
