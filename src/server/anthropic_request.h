// An Anthropic Messages request (POST /v1/messages, /v1/messages/count_tokens)
// translated into the chat-completions request the server already knows, so
// that the prompt, tools, reasoning switch, forced tool calls and stop rules
// are the chat path's own: `system` becomes the system message, text /
// tool_use / thinking blocks an assistant message with tool_calls and
// reasoning_content, tool_result blocks tool messages (is_error marked in the
// text, since chat templates have no such flag), tool_choice any / tool / none
// the chat tool_choice, thinking.type enabled / disabled the template's
// enable_thinking. Every bad field is a 400 naming it in Anthropic's terms
// (messages[1].content[0].tool_use_id).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "server/api_error.h"

namespace anymoe {

struct MessagesLimits {
  size_t max_messages = 4096;
  size_t max_blocks = 4096;  // content blocks per message
  size_t max_tools = 128;
  size_t max_stop_sequences = 16;
};

// `count_tokens`: the count_tokens body (no max_tokens, no sampling fields).
// Fills `chat` with a /v1/chat/completions body (keys in the client's order).
std::optional<ApiError> TranslateMessagesRequest(const nlohmann::ordered_json& body,
                                                 const MessagesLimits& limits, bool count_tokens,
                                                 nlohmann::ordered_json* chat);

}  // namespace anymoe
