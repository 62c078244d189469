// The agent-facing fields of an OpenAI chat request, checked and shaped for
// the model's chat template: messages with tool calls, tool results and
// reasoning fed back, `tools`, `tool_choice`, `chat_template_kwargs`,
// `reasoning_effort` and `response_format`. Every bad field is a 400 naming
// it (with its index path, e.g. messages[2].tool_calls[0].function.name).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace anymoe {

enum class ToolChoice {
  kAuto,      // the model decides; its own tool-call syntax is parsed
  kNone,      // tools stay in the prompt, the output is never parsed for calls
  kRequired,  // at least one call, forced by constrained decoding
  kFunction,  // one call of the named function, forced by constrained decoding
};

enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

struct ChatParams {
  // OpenAI messages as the template sees them: content as a string (text
  // parts joined; null or absent: "", as vLLM passes it), tool_calls with `function.arguments` as an object (what
  // GLM / Qwen / Llama templates iterate; vLLM does the same), None-valued
  // keys dropped by the renderer.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: none
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_name;            // kFunction
  bool parallel_tool_calls = true;  // false: at most one call under kRequired
  // chat_template_kwargs, plus reasoning_effort when given at the top level.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  ResponseFormat response_format = ResponseFormat::kText;
  nlohmann::ordered_json response_schema;  // kJsonSchema
  // The request field that held it (errors name it): response_format's, or
  // llama-server's top-level json_schema.
  std::string response_schema_param = "response_format.json_schema.schema";

  // The output is forced into JSON by constrained decoding.
  bool constrained() const {
    return response_format != ResponseFormat::kText || tool_choice == ToolChoice::kRequired ||
           tool_choice == ToolChoice::kFunction;
  }
  // The tool-call parser reads the output (tools given, the model chooses).
  bool parse_tool_calls() const {
    return !tools.is_null() && tool_choice == ToolChoice::kAuto && !constrained();
  }
};

struct ChatParamLimits {
  size_t max_messages = 4096;
  size_t max_tools = 128;
};

// Reads the fields above from a chat request body (keys in the client's
// order). Leaves `out` partly filled on error.
std::optional<ApiError> ParseChatParams(const nlohmann::ordered_json& body,
                                        const ChatParamLimits& limits, ChatParams* out);

// The JSON schema that constrained decoding enforces for a forced tool call:
// kFunction, the function's `parameters` (the output is its arguments);
// kRequired, an array of {"name": const, "arguments": parameters} objects,
// one of each tool (at most one item without parallel_tool_calls).
nlohmann::ordered_json ForcedToolCallSchema(const ChatParams& params);

}  // namespace anymoe
