#include "server/request_params.h"

#include <cmath>
#include <limits>

#include "server/json_fields.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

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

}  // namespace

std::optional<ApiError> ReadBool(const json& body, const char* name, bool* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean())
    return InvalidField(name, std::string(name) + " must be a boolean", "invalid_type");
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ReadGrammar(const json& body, std::string* out) {
  const json* v = Field(body, "grammar");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return InvalidField("grammar", "grammar must be a string", "invalid_type");
  *out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ReadInt(const json& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer())
    return InvalidField(name, std::string(name) + " must be an integer", "invalid_type");
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

std::optional<ApiError> ReadNumber(const json& body, const char* name, double lo, double hi,
                                   bool open_low, float* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number())
    return InvalidField(name, std::string(name) + " must be a number", "invalid_type");
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

namespace {

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

std::optional<ApiError> ReadLogitBias(const json& body, const RequestLimits& limits,
                                      CompletionRequest* out) {
  const json* b = Field(body, "logit_bias");
  if (b == nullptr) return std::nullopt;
  if (!b->is_object())
    return InvalidField("logit_bias", "logit_bias must be an object", "invalid_type");
  if (b->size() > limits.max_logit_bias) {
    return InvalidField("logit_bias",
                        "at most " + std::to_string(limits.max_logit_bias) + " logit_bias entries");
  }
  for (const auto& [key, value] : b->items()) {
    // Keys are token ids as decimal text.
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 &&
        key.find_first_not_of("0123456789") == std::string::npos) {
      id = std::stoll(key);
    }
    if (id < 0 || id >= limits.vocab_size) {
      return InvalidField(
          "logit_bias",
          "logit_bias keys must be token ids in [0, " + std::to_string(limits.vocab_size) + ")",
          "invalid_token");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) ||
        std::fabs(value.get<double>()) > 100) {
      return InvalidField("logit_bias", "logit_bias values must be numbers in [-100, 100]");
    }
    out->logit_bias.emplace_back(int32_t(id), value.get<float>());
  }
  return std::nullopt;
}

// n, echo, and the fields we accept only at their neutral value.
std::optional<ApiError> ReadChoiceFields(const json& body, bool chat, const RequestLimits& limits,
                                         CompletionRequest* out) {
  std::optional<int64_t> n;
  RETURN_IF_API_ERROR(ReadInt(body, "n", 1, limits.max_n, &n));
  out->n = int(n.value_or(1));
  if (!chat) {
    std::optional<int64_t> best_of;
    RETURN_IF_API_ERROR(ReadInt(body, "best_of", 1, 1, &best_of));
    RETURN_IF_API_ERROR(ReadBool(body, "echo", &out->echo));
    if (const json* s = Field(body, "suffix"); s != nullptr && !(s->is_string() && s->empty())) {
      return InvalidField("suffix", "suffix is not supported");
    }
    // Completions have no tools or structured output (chat has both).
    for (const char* name : {"tools", "response_format", "tool_choice"}) {
      if (Field(body, name) != nullptr) {
        return InvalidField(name, std::string(name) + " is only supported by /v1/chat/completions");
      }
    }
  }
  for (const char* name : {"frequency_penalty", "presence_penalty"}) {
    float x = 0;
    RETURN_IF_API_ERROR(ReadNumber(body, name, -2, 2, false, &x));
    if (x != 0) return InvalidField(name, std::string(name) + " is not supported (use 0)");
  }
  if (const json* f = Field(body, "functions"); f != nullptr && !(f->is_array() && f->empty())) {
    return InvalidField("functions", "functions is not supported (use tools)");
  }
  return ReadLogitBias(body, limits, out);
}

}  // namespace

std::optional<ApiError> ParseCompletionRequest(const json& body, bool chat,
                                               const RequestLimits& limits, CompletionRequest* out,
                                               const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  *out = CompletionRequest{};
  out->chat = chat;
  out->sampling.temperature = 1.0f;
  out->sampling.top_p = 1.0f;
  out->sampling.top_k = 0;
  out->sampling.min_p = 0.0f;

  if (const json* m = Field(body, "model"); m != nullptr && !m->is_string()) {
    return InvalidField("model", "model must be a string", "invalid_type");
  }
  RETURN_IF_API_ERROR(ReadChoiceFields(body, chat, limits, out));
  if (chat) {
    nlohmann::ordered_json converted;
    if (ordered == nullptr) {
      converted = nlohmann::ordered_json::parse(body.dump());
      ordered = &converted;
    }
    ChatParamLimits chat_limits;
    chat_limits.max_messages = limits.max_messages;
    chat_limits.max_tools = limits.max_tools;
    RETURN_IF_API_ERROR(ParseChatParams(*ordered, chat_limits, &out->chat_params));
    for (const auto& m : out->chat_params.messages) {
      out->messages.push_back({m["role"].get<std::string>(),
                               m["content"].is_string() ? m["content"].get<std::string>() : ""});
    }
  } else {
    RETURN_IF_API_ERROR(ReadPrompt(body, limits, out));
  }

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
    if (!s->is_number_integer())
      return InvalidField("seed", "seed must be an integer", "invalid_type");
    out->seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(s->get<int64_t>());
  }
  RETURN_IF_API_ERROR(ReadStop(body, limits, &out->stop));
  RETURN_IF_API_ERROR(ReadBool(body, "stream", &out->stream));
  RETURN_IF_API_ERROR(ReadBool(body, "ignore_eos", &out->ignore_eos));
  if (const json* o = Field(body, "stream_options"); o != nullptr) {
    if (!o->is_object())
      return InvalidField("stream_options", "stream_options must be an object", "invalid_type");
    auto usage = o->find("include_usage");
    if (usage != o->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return InvalidField("stream_options.include_usage",
                            "stream_options.include_usage must be a boolean", "invalid_type");
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
    if (out->echo && out->logprobs) {
      return InvalidField("echo", "echo with logprobs is not supported");
    }
  }
  RETURN_IF_API_ERROR(ReadGrammar(body, &out->grammar));
  if (!out->grammar.empty() && chat && out->chat_params.constrained()) {
    return InvalidField("grammar",
                        "grammar cannot be combined with response_format json_object / json_schema "
                        "or a forced tool_choice; send one",
                        "grammar_and_json_schema");
  }
  return std::nullopt;
}

}  // namespace anymoe
