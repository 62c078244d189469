// OpenAI-shaped errors: every 4xx/5xx the server sends is
// {"error": {"message", "type", "param", "code"}}. Messages name the field or
// limit that was wrong and never echo request text (reliability.md §1.1, E5).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace anymoe {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; "" when none
  std::string code;   // machine-readable reason; "" when none
  // More fields of the error object (a context overflow's n_prompt_tokens
  // and n_ctx, as llama-server reports them).
  nlohmann::json extra = nlohmann::json::object();
};

// 400 naming `param`.
// A 400 naming `param`; `code` "" means "invalid_value" (a wrong type is
// "invalid_type"), so every 400 carries a code.
ApiError InvalidField(std::string param, std::string message, std::string code = "");
// 503 with `code` (queue_full, model_loading, shutting_down).
ApiError Unavailable(std::string message, std::string code);

// The answer for a typed Status (core/status.h): kInvalidArgument is a 400
// naming its field and code, kUnavailable a 503, anything else a 500. The
// message is the Status's, so it must not hold request text or paths.
ApiError ApiErrorFromStatus(const Status& status);

// The JSON body for `error` (param/code are null when empty), as a value and as text.
nlohmann::json ApiErrorValue(const ApiError& error);
std::string ApiErrorJson(const ApiError& error);

}  // namespace anymoe
