// Tool calls in generated text, whole or streamed: GLM-4.5/4.6 and GLM-4.7/5.x
// (<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>, with
// or without newlines, zero-argument calls), Qwen3 / Hermes (JSON inside
// <tool_call> tags), Llama-3.x JSON ({"name", "parameters"}, optional
// <|python_tag|>, ";"-separated) and DeepSeek-V3 / V3.1 markers. Output is
// OpenAI-shaped: calls with an id, a name and arguments as a JSON string
// (Python json.dumps spacing), and while streaming, deltas (the name first,
// then argument fragments) plus the plain content outside calls. Whatever the
// chunking, the deltas concatenate to the same calls and content.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

enum class ToolCallDialect { kNone, kGlm45, kGlm47, kHermes, kLlama3Json, kDeepSeekV3 };

std::string_view ToolCallDialectName(ToolCallDialect d);  // "none", "glm45", "glm47", ...
Expected<ToolCallDialect> ToolCallDialectFromName(std::string_view name);
// The dialect a chat template teaches its model (markers in the Jinja source);
// kNone when the template renders no tool calls.
ToolCallDialect DetectToolCallDialect(std::string_view template_source);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object as text
};

// One streamed piece of a call: the first delta of call `index` carries its id
// and name (and empty arguments), later ones argument text to append.
struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;
  std::string arguments;
};

struct ToolCallOutput {
  std::string content;                // plain text outside calls, to append
  std::vector<ToolCallDelta> deltas;  // in order
};

class ToolCallParser {
 public:
  // `tools`: the request's OpenAI tool list (null: none), whose parameter
  // schemas type GLM's raw argument values. Ids are "call_<id_prefix><index>".
  ToolCallParser(ToolCallDialect dialect, nlohmann::ordered_json tools = nullptr,
                 std::string id_prefix = "");

  // Feeds generated text; returns what can be told so far (a possible marker
  // at the end is held back).
  ToolCallOutput Feed(std::string_view text);
  // End of generation: releases held-back text; an unterminated call is closed
  // with the arguments it has.
  ToolCallOutput Finish();

  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kText, kGlmName, kGlmArgs, kHermesBody, kDsCalls, kLlamaStart, kLlamaJson, kPlain };
  bool Step(bool final, ToolCallOutput* out);  // false: needs more text
  bool StepText(bool final, ToolCallOutput* out);
  bool StepGlmName(bool final, ToolCallOutput* out);
  bool StepGlmArgs(bool final, ToolCallOutput* out);
  bool StepHermes(bool final, ToolCallOutput* out);
  bool StepDeepSeek(bool final, ToolCallOutput* out);
  bool StepLlamaStart(bool final, ToolCallOutput* out);
  bool StepLlamaJson(bool final, ToolCallOutput* out);
  void EmitContent(std::string_view text, ToolCallOutput* out);
  void BeginCall(std::string name, ToolCallOutput* out);
  void AppendArguments(const std::string& text, ToolCallOutput* out);
  void EndCall(ToolCallOutput* out);
  void AddWholeCall(std::string name, std::string arguments, ToolCallOutput* out);
  std::string TypedGlmValue(const std::string& key, const std::string& raw) const;

  ToolCallDialect dialect_;
  nlohmann::ordered_json tools_;
  std::string id_prefix_;
  State state_ = State::kText;
  std::string buf_;              // text not yet decided
  std::string pending_space_;    // whitespace after a call, dropped unless content follows
  bool after_call_ = false;
  bool call_open_ = false;
  int args_in_call_ = 0;
  std::vector<ToolCall> calls_;
};

// Whole text at once.
struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedToolCalls ParseToolCalls(ToolCallDialect dialect, std::string_view text,
                               const nlohmann::ordered_json& tools = nullptr,
                               const std::string& id_prefix = "");

// A JSON document of at most `max_depth` levels, or null (discarded) when the
// text is not one.
nlohmann::ordered_json ParseJsonLimited(std::string_view text, int max_depth = 64);
// json.dumps(value, ensure_ascii=False).
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

}  // namespace anymoe
