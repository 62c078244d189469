#include "server/request_params.h"

#include <cmath>
#include <limits>

namespace anymoe {
namespace {

using json = nlohmann::json;

#define RETURN_IF_API_ERROR(expr)                       \
  do {                                                  \
    if (std::optional<ApiError> _e = (expr)) return _e; \
  } while (0)

// A field that is absent or null counts as not given.
const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Range(double lo, double hi) {
  auto fmt = [](double v) {
    if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(int64_t(v));
    std::string s = std::to_string(v);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    return s;
  };
  std::string out = "[";  // built by appending: GCC 12 warns (-Wrestrict) on "[" + ...
  out += fmt(lo);
  out += ", ";
  out += fmt(hi);
  out += "]";
  return out;
}

std::optional<ApiError> ReadBool(const json& body, const char* name, bool* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return InvalidField(name, std::string(name) + " must be a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const json& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return InvalidField(name, std::string(name) + " must be an integer");
  if (v->is_number_unsigned() &&
      v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    return InvalidField(name, std::string(name) + " must be in " + Range(double(lo), double(hi)));
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    return InvalidField(name, std::string(name) + " must be in " + Range(double(lo), double(hi)));
  }
  *out = x;
  return std::nullopt;
}

// A number in [lo, hi], or (lo, hi] when `open_low`.
std::optional<ApiError> ReadNumber(const json& body, const char* name, double lo, double hi,
                                   bool open_low, float* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return InvalidField(name, std::string(name) + " must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x > hi || (open_low ? x <= lo : x < lo)) {
    std::string range = Range(lo, hi);
    if (open_low) range[0] = '(';
    return InvalidField(name, std::string(name) + " must be in " + range);
  }
  *out = float(x);
  return std::nullopt;
}

std::optional<ApiError> ReadTokenIds(const json& array, const char* name, int64_t vocab_size,
                                     std::vector<int32_t>* out) {
  out->clear();
  out->reserve(array.size());
  for (const json& t : array) {
    if (!t.is_number_integer()) {
      return InvalidField(name, std::string(name) + " token ids must be integers");
    }
    const bool in_range = t.is_number_unsigned()
                              ? t.get<uint64_t>() < uint64_t(vocab_size)
                              : t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab_size;
    if (!in_range) {
      return InvalidField(name,
                          std::string(name) + " contains a token id outside [0, " +
                              std::to_string(vocab_size) + ")",
                          "invalid_token");
    }
    out->push_back(int32_t(t.get<int64_t>()));
  }
  return std::nullopt;
}

// prompt: "text" | [ids] | ["text"] | [[ids]]; one prompt only (n = 1).
std::optional<ApiError> ReadPrompt(const json& body, const RequestLimits& limits,
                                   CompletionRequest* out) {
  const json* v = Field(body, "prompt");
  if (v == nullptr) return InvalidField("prompt", "prompt is required");
  const json* p = v;
  if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) {
    p = &(*v)[0];  // a batch of one
  }
  if (p->is_string()) {
    out->prompt_text = p->get<std::string>();
    out->prompt_is_ids = false;
    if (out->prompt_text.empty()) return InvalidField("prompt", "prompt must not be empty");
    return std::nullopt;
  }
  if (p->is_array()) {
    if (p->empty()) return InvalidField("prompt", "prompt must not be empty");
    if (!(*p)[0].is_number()) {
      return InvalidField("prompt",
                          "prompt must be a string, an array of token ids, or a batch "
                          "of one of those (more than one prompt is not supported)");
    }
    out->prompt_is_ids = true;
    return ReadTokenIds(*p, "prompt", limits.vocab_size, &out->prompt_ids);
  }
  return InvalidField("prompt", "prompt must be a string or an array of token ids");
}

std::optional<ApiError> ReadContent(const json& message, size_t index, std::string* out) {
  const std::string name = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    out->clear();
    return std::nullopt;
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return InvalidField(name, name + " must be a string or an array of parts");
  out->clear();
  for (const json& part : *it) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto text = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text" ||
        text == part.end() || !text->is_string()) {
      return InvalidField(name, name +
                                    ": only {\"type\": \"text\", \"text\": ...} parts are "
                                    "supported");
    }
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessages(const json& body, const RequestLimits& limits,
                                     CompletionRequest* out) {
  const json* v = Field(body, "messages");
  if (v == nullptr) return InvalidField("messages", "messages is required");
  if (!v->is_array()) return InvalidField("messages", "messages must be an array");
  if (v->empty()) return InvalidField("messages", "messages must not be empty");
  if (v->size() > limits.max_messages) {
    return InvalidField("messages",
                        "more than " + std::to_string(limits.max_messages) + " messages");
  }
  out->messages.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return InvalidField(name, name + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return InvalidField(name + ".role", name + ".role must be a string");
    }
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return InvalidField(name + ".role",
                          name + ".role must be one of system, developer, user, assistant, tool");
    }
    ChatMessage message{r, ""};
    RETURN_IF_API_ERROR(ReadContent(m, i, &message.content));
    out->messages.push_back(std::move(message));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadStop(const json& body, const RequestLimits& limits,
                                 std::vector<std::string>* out) {
  const json* v = Field(body, "stop");
  if (v == nullptr) return std::nullopt;
  auto add = [&](const json& s) -> std::optional<ApiError> {
    if (!s.is_string()) return InvalidField("stop", "stop must be a string or an array of strings");
    const std::string text = s.get<std::string>();
    if (text.empty()) return InvalidField("stop", "stop strings must not be empty");
    if (text.size() > limits.max_stop_bytes) {
      return InvalidField("stop", "stop strings must be at most " +
                                      std::to_string(limits.max_stop_bytes) + " bytes");
    }
    out->push_back(text);
    return std::nullopt;
  };
  if (v->is_string()) return add(*v);
  if (!v->is_array()) return InvalidField("stop", "stop must be a string or an array of strings");
  if (v->size() > size_t(limits.max_stop_strings)) {
    return InvalidField("stop",
                        "at most " + std::to_string(limits.max_stop_strings) + " stop strings");
  }
  for (const json& s : *v) RETURN_IF_API_ERROR(add(s));
  return std::nullopt;
}

// Fields we accept only at their neutral value.
std::optional<ApiError> RejectUnsupported(const json& body, bool chat) {
  std::optional<int64_t> n;
  RETURN_IF_API_ERROR(ReadInt(body, "n", 1, 1, &n));
  if (!chat) {
    std::optional<int64_t> best_of;
    RETURN_IF_API_ERROR(ReadInt(body, "best_of", 1, 1, &best_of));
    bool echo = false;
    RETURN_IF_API_ERROR(ReadBool(body, "echo", &echo));
    if (echo) return InvalidField("echo", "echo is not supported");
    if (const json* s = Field(body, "suffix"); s != nullptr && !(s->is_string() && s->empty())) {
      return InvalidField("suffix", "suffix is not supported");
    }
  }
  for (const char* name : {"frequency_penalty", "presence_penalty"}) {
    float x = 0;
    RETURN_IF_API_ERROR(ReadNumber(body, name, -2, 2, false, &x));
    if (x != 0) return InvalidField(name, std::string(name) + " is not supported (use 0)");
  }
  if (const json* b = Field(body, "logit_bias"); b != nullptr) {
    if (!b->is_object()) return InvalidField("logit_bias", "logit_bias must be an object");
    if (!b->empty()) return InvalidField("logit_bias", "logit_bias is not supported");
  }
  for (const char* name : {"tools", "functions"}) {
    if (const json* t = Field(body, name); t != nullptr && !(t->is_array() && t->empty())) {
      return InvalidField(name, std::string(name) + " is not supported");
    }
  }
  if (const json* f = Field(body, "response_format"); f != nullptr) {
    auto type = f->is_object() ? f->find("type") : f->end();
    if (type == f->end() || !type->is_string() || type->get<std::string>() != "text") {
      return InvalidField("response_format",
                          "only response_format {\"type\": \"text\"} is "
                          "supported");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const json& body, bool chat,
                                               const RequestLimits& limits,
                                               CompletionRequest* out) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  *out = CompletionRequest{};
  out->chat = chat;
  out->sampling.temperature = 1.0f;
  out->sampling.top_p = 1.0f;
  out->sampling.top_k = 0;
  out->sampling.min_p = 0.0f;

  if (const json* m = Field(body, "model"); m != nullptr && !m->is_string()) {
    return InvalidField("model", "model must be a string");
  }
  RETURN_IF_API_ERROR(RejectUnsupported(body, chat));
  RETURN_IF_API_ERROR(chat ? ReadMessages(body, limits, out) : ReadPrompt(body, limits, out));

  constexpr int64_t kMaxTokens = int64_t(1) << 30;
  std::optional<int64_t> max_tokens, max_completion_tokens;
  RETURN_IF_API_ERROR(ReadInt(body, "max_tokens", 1, kMaxTokens, &max_tokens));
  RETURN_IF_API_ERROR(
      ReadInt(body, "max_completion_tokens", 1, kMaxTokens, &max_completion_tokens));
  out->max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;

  RETURN_IF_API_ERROR(ReadNumber(body, "temperature", 0, 2, false, &out->sampling.temperature));
  RETURN_IF_API_ERROR(ReadNumber(body, "top_p", 0, 1, true, &out->sampling.top_p));
  RETURN_IF_API_ERROR(ReadNumber(body, "min_p", 0, 1, false, &out->sampling.min_p));
  std::optional<int64_t> top_k;
  RETURN_IF_API_ERROR(ReadInt(body, "top_k", -1, std::numeric_limits<int32_t>::max(), &top_k));
  if (top_k) out->sampling.top_k = int(*top_k);  // -1 and 0: off

  if (const json* s = Field(body, "seed"); s != nullptr) {
    if (!s->is_number_integer()) return InvalidField("seed", "seed must be an integer");
    out->seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(s->get<int64_t>());
  }
  RETURN_IF_API_ERROR(ReadStop(body, limits, &out->stop));
  RETURN_IF_API_ERROR(ReadBool(body, "stream", &out->stream));
  RETURN_IF_API_ERROR(ReadBool(body, "ignore_eos", &out->ignore_eos));
  if (const json* o = Field(body, "stream_options"); o != nullptr) {
    if (!o->is_object()) return InvalidField("stream_options", "stream_options must be an object");
    auto usage = o->find("include_usage");
    if (usage != o->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return InvalidField("stream_options.include_usage",
                            "stream_options.include_usage must be a boolean");
      }
      out->include_usage = usage->get<bool>();
    }
  }

  const int64_t max_top = limits.max_top_logprobs;
  if (chat) {
    RETURN_IF_API_ERROR(ReadBool(body, "logprobs", &out->logprobs));
    std::optional<int64_t> top;
    RETURN_IF_API_ERROR(ReadInt(body, "top_logprobs", 0, max_top, &top));
    if (top && *top > 0 && !out->logprobs) {
      return InvalidField("top_logprobs", "top_logprobs requires logprobs: true");
    }
    out->top_logprobs = top ? int(*top) : 0;
  } else {
    // Completions: logprobs is the number of alternatives (0: the chosen token only).
    std::optional<int64_t> k;
    RETURN_IF_API_ERROR(ReadInt(body, "logprobs", 0, max_top, &k));
    out->logprobs = k.has_value();
    out->top_logprobs = k ? int(*k) : 0;
  }
  return std::nullopt;
}

}  // namespace anymoe
