// One chat choice's generated text turned into an OpenAI assistant message,
// whole or as stream deltas: reasoning (<think>) split from content, tool
// calls in the model's own syntax parsed (tool_choice auto), or the JSON that
// constrained decoding forced for tool_choice required / a named function
// turned into calls. Streamed deltas concatenate to the whole message.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"

namespace anymoe {

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatOutput {
 public:
  enum class Mode {
    kText,          // content (and reasoning)
    kToolsAuto,     // content with the model's own tool-call syntax parsed
    kToolFunction,  // the text is the arguments of `function` (JSON object)
    kToolRequired,  // the text is [{"name": ..., "arguments": {...}}, ...]
  };
  struct Options {
    Mode mode = Mode::kText;
    // Split <think> ... </think>; the prompt may leave the model inside it.
    bool split_reasoning = false;
    bool starts_in_reasoning = false;
    ToolCallDialect dialect = ToolCallDialect::kNone;
    nlohmann::ordered_json tools;  // types GLM argument values
    std::string function;          // kToolFunction
    std::string id_prefix;         // call ids are "call_<id_prefix><index>"
  };
  explicit ChatOutput(Options options);

  ChatDelta Feed(std::string_view text);
  ChatDelta Finish();  // end of generation: what was held back

  // Everything so far, for a whole response.
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  ChatDelta FromContent(std::string_view text, bool final);
  void Record(const ChatDelta& d);
  // kToolRequired: reads the forced JSON array byte by byte.
  void ScanCallArray(std::string_view text, ChatDelta* out);

  Options options_;
  std::optional<ReasoningParser> reasoning_parser_;
  std::optional<ToolCallParser> tool_parser_;
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;

  // The forced-call scanner's state (kToolRequired).
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  std::string key_, token_;     // the last key read; the current string's raw text
  bool reading_value_ = false;  // after "key": at depth 2
  bool in_arguments_ = false;   // inside the "arguments" value
  int arguments_depth_ = 0;
};

// The assistant message of a whole response.
nlohmann::json ChatMessageJson(const ChatOutput& output);
// The delta object of a stream chunk.
nlohmann::json ChatDeltaJson(const ChatDelta& delta);
// OpenAI tool_calls entries.
nlohmann::json ToolCallsJson(const std::vector<ToolCall>& calls);

}  // namespace anymoe
