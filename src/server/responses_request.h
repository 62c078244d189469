// An OpenAI Responses request (POST /v1/responses) translated into the
// chat-completions request the server already knows, so that prompt, tools,
// forced calls, structured output and stop rules are the chat path's own:
// `instructions` becomes the system message, `input` (a string, or message,
// function_call, function_call_output and reasoning items) the messages,
// function tools the chat tools, text.format the response_format,
// reasoning.effort the template's reasoning_effort, max_output_tokens the
// max_tokens. This server keeps no responses: store true,
// previous_response_id, conversation and background are 400s.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "server/api_error.h"

namespace anymoe {

struct ResponsesLimits {
  size_t max_items = 4096;
  size_t max_tools = 128;
};

// `input_only`: only what shapes the prompt is read (the input-token count).
std::optional<ApiError> TranslateResponsesRequest(const nlohmann::ordered_json& body,
                                                  bool input_only, nlohmann::ordered_json* chat,
                                                  const ResponsesLimits& limits = {});

}  // namespace anymoe
