// The wire format of a chat front end other than OpenAI chat completions
// (Anthropic Messages, OpenAI Responses). Those front ends translate their
// request into a chat-completions request (one request model) and read the
// generated text through the same ChatOutput (one output path: template,
// reasoning split, tool-call parsers, forced calls); an encoder only turns
// ChatOutput's deltas into that API's stream events and whole body. Every
// delta goes through Delta() whether the response streams or not, so a
// streamed response accumulates to the same body as a non-streamed one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generator.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/openai_format.h"

namespace anymoe {

// How a generation ended, once it did.
struct ChatFinish {
  StopReason reason = StopReason::kMaxTokens;
  std::string stop_sequence;  // the stop string that ended it (kStopString)
  Usage usage;
};

class ChatEncoder {
 public:
  virtual ~ChatEncoder() = default;
  // The stream's first events (the prompt is counted, nothing generated yet).
  virtual std::string Open(const Usage& usage) = 0;
  // A piece of output; returns its SSE events (possibly none).
  virtual std::string Delta(const ChatDelta& delta) = 0;
  // The last events; Body() may be called after it.
  virtual std::string Close(const ChatFinish& finish) = 0;
  // The whole response, after Close().
  virtual nlohmann::json Body(const ChatFinish& finish) const = 0;
  // A failure after the stream began, as this API reports it in-stream.
  virtual std::string StreamError(const ApiError& error) const = 0;
  // Sent while the model is silent (keeps proxies from closing the stream).
  virtual std::string_view Ping() const = 0;
};

// ChatOutput's deltas as the ordered parts Anthropic's content blocks and the
// Responses API's output items are: a part opens when the kind changes
// (reasoning, text, another tool call); a text part opens at its first
// non-blank character, so the blank text models write around their tool
// calls makes no empty part (blank text between parts is dropped).
class OutputParts {
 public:
  enum class Kind { kNone, kReasoning, kText, kToolCall };
  class Sink {
   public:
    virtual ~Sink() = default;
    // `call`: the call's first delta (id, name) for kToolCall, else null.
    virtual void OpenPart(Kind kind, const ToolCallDelta* call) = 0;
    virtual void AppendToPart(std::string_view text) = 0;
    virtual void ClosePart() = 0;
  };
  void Feed(const ChatDelta& delta, Sink& sink);
  void Finish(Sink& sink);  // closes the open part

 private:
  void Switch(Kind kind, size_t call, const ToolCallDelta* first, Sink& sink);
  Kind open_ = Kind::kNone;
  size_t open_call_ = 0;
  std::string pending_blank_;
};

// Which front end a request came through; picks the error shape as well
// (kNative: llama-server's /completion and /infill, in the OpenAI shape).
enum class ChatApi { kOpenAi, kAnthropic, kResponses, kNative };

// The error body in the API's own shape (OpenAI's for kOpenAi and kResponses,
// Anthropic's {"type": "error", "error": {"type", "message"}} for kAnthropic).
nlohmann::json ChatApiErrorValue(ChatApi api, const ApiError& error);

// "event: NAME\ndata: JSON\n\n", the named-event framing Anthropic and the
// Responses API use.
std::string SseEvent(std::string_view name, const nlohmann::json& data);

}  // namespace anymoe
