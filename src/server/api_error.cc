#include "server/api_error.h"

#include <nlohmann/json.hpp>

#include "server/sse.h"

namespace anymoe {

ApiError InvalidField(std::string param, std::string message, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = code.empty() ? "invalid_value" : std::move(code);
  return e;
}

ApiError Unavailable(std::string message, std::string code) {
  ApiError e;
  e.status = 503;
  e.type = "unavailable_error";
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

ApiError ApiErrorFromStatus(const Status& status) {
  ApiError e;
  e.message = status.message();
  e.param = status.field();
  e.code = status.code();
  switch (status.kind()) {
    case ErrorKind::kInvalidArgument:
      e.status = 400;
      e.type = "invalid_request_error";
      if (e.code.empty()) e.code = "invalid_value";
      break;
    case ErrorKind::kUnavailable:
      e.status = 503;
      e.type = "unavailable_error";
      break;
    case ErrorKind::kUnknown:
    case ErrorKind::kInternal:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

nlohmann::json ApiErrorValue(const ApiError& error) {
  nlohmann::json body = {{"message", error.message}, {"type", error.type}};
  body["param"] = error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param);
  body["code"] = error.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.code);
  for (const auto& [key, value] : error.extra.items()) body[key] = value;
  return nlohmann::json{{"error", std::move(body)}};
}

std::string ApiErrorJson(const ApiError& error) { return DumpJson(ApiErrorValue(error)); }

}  // namespace anymoe
