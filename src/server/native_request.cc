#include "server/native_request.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "server/json_fields.h"
#include "tokenizer/fim_tokens.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

// The sampler names llama-server's `samplers` takes.
constexpr std::array<std::string_view, 10> kSamplerNames = {
    "penalties", "dry", "top_n_sigma", "top_k", "typ_p",
    "top_p",     "min_p", "xtc",       "temperature", "infill"};

// llama-server's defaults for /completion, where OpenAI's differ.
constexpr double kDefaultTemperature = 0.8;
constexpr int kDefaultTopK = 40;
constexpr double kDefaultTopP = 0.95;
constexpr double kDefaultMinP = 0.05;

// Fields whose every value but the neutral one changes sampling in a way this
// server does not implement.
struct NeutralField {
  const char* name;
  double neutral;
};
constexpr NeutralField kNeutralNumbers[] = {
    {"typical_p", 1.0},     {"dynatemp_range", 0.0}, {"xtc_probability", 0.0},
    {"mirostat", 0.0},      {"dry_multiplier", 0.0},
};

std::optional<ApiError> Unsupported(const char* name, const std::string& neutral) {
  return InvalidField(name, std::string(name) + " is not supported (leave it out or use " +
                                neutral + ")",
                      "unsupported_parameter");
}

std::optional<ApiError> CheckNeutralFields(const json& body) {
  for (const NeutralField& f : kNeutralNumbers) {
    const json* v = Field(body, f.name);
    if (v == nullptr) continue;
    if (!v->is_number()) {
      return InvalidField(f.name, std::string(f.name) + " must be a number", "invalid_type");
    }
    if (v->get<double>() != f.neutral) {
      return Unsupported(f.name, f.neutral == 0 ? "0" : "1");
    }
  }
  if (const json* v = Field(body, "top_n_sigma"); v != nullptr) {
    if (!v->is_number()) return InvalidField("top_n_sigma", "top_n_sigma must be a number", "invalid_type");
    if (v->get<double>() > 0) return Unsupported("top_n_sigma", "-1");
  }
  for (const char* name : {"post_sampling_probs", "return_progress"}) {
    bool on = false;
    RETURN_IF_API_ERROR(ReadBool(body, name, &on));
    if (on) return Unsupported(name, "false");
  }
  if (const json* v = Field(body, "lora"); v != nullptr && !(v->is_array() && v->empty())) {
    return Unsupported("lora", "[]");
  }
  if (const json* v = Field(body, "multimodal_data"); v != nullptr) {
    return InvalidField("multimodal_data", "this server serves text models only",
                        "unsupported_parameter");
  }
  return std::nullopt;
}

// One prompt: "text", [ids], [ids and "text" mixed], {"prompt_string": "text"},
// or a batch of exactly one of those.
std::optional<ApiError> ReadPromptPieces(const json& v, const char* name, const NativeLimits& limits,
                                         std::vector<NativePromptPiece>* out) {
  const json* p = &v;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_array() || (*p)[0].is_object())) {
    p = &(*p)[0];  // a batch of one
  }
  if (p->is_object()) {
    const json* s = Field(*p, "prompt_string");
    if (Field(*p, "multimodal_data") != nullptr) {
      return InvalidField(name, "this server serves text models only (no multimodal_data)",
                          "unsupported_parameter");
    }
    if (s == nullptr || !s->is_string()) {
      return InvalidField(name, std::string(name) + ".prompt_string must be a string",
                          "invalid_type");
    }
    p = s;
  }
  if (p->is_string()) {
    out->push_back({true, p->get<std::string>(), {}});
    return std::nullopt;
  }
  if (!p->is_array()) {
    return InvalidField(name, std::string(name) + " must be a string or an array of token ids and strings",
                        "invalid_type");
  }
  std::vector<int32_t> ids;
  for (const json& e : *p) {
    if (out->size() >= limits.max_prompt_pieces) {
      return InvalidField(name, std::string(name) + " has more than " +
                                    std::to_string(limits.max_prompt_pieces) + " pieces");
    }
    if (e.is_string()) {
      out->push_back({true, e.get<std::string>(), {}});
    } else if (e.is_number()) {
      RETURN_IF_API_ERROR(ReadTokenIds(json::array({e}), name, limits.base.vocab_size, &ids));
      if (out->empty() || out->back().is_text) out->push_back({false, "", {}});
      out->back().ids.push_back(ids[0]);
    } else {
      return InvalidField(name,
                          std::string(name) +
                              " must be one prompt: a string, or an array of token ids and "
                              "strings (more than one prompt per request is not supported)");
    }
  }
  return std::nullopt;
}

// logit_bias as llama-server takes it: [[id, bias | false], ...] or
// {"id": bias}; `false` bans the token. Into the OpenAI object form.
std::optional<ApiError> TranslateLogitBias(const json& v, json* out) {
  if (v.is_object()) {
    *out = v;
    return std::nullopt;
  }
  if (!v.is_array()) {
    return InvalidField("logit_bias", "logit_bias must be an array of [token id, bias] pairs",
                        "invalid_type");
  }
  *out = json::object();
  for (const json& pair : v) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer()) {
      return InvalidField("logit_bias",
                          "logit_bias entries must be [token id, bias] pairs (token strings are "
                          "not supported: use /tokenize)");
    }
    const json& bias = pair[1];
    if (!(bias.is_number() || (bias.is_boolean() && !bias.get<bool>()))) {
      return InvalidField("logit_bias", "a logit_bias bias must be a number or false");
    }
    (*out)[pair[0].dump()] = bias.is_boolean() ? json(-100) : bias;
  }
  return std::nullopt;
}

// The fields that map one to one (or with llama-server's defaults) onto an
// OpenAI completions body.
std::optional<ApiError> TranslateToCompletions(const json& body, const NativeLimits& limits,
                                               NativeRequest* out, json* oa) {
  *oa = json::object();
  (*oa)["prompt"] = "-";  // the prompt is NativeRequest::prompt (token pieces)
  for (const char* name : {"model", "stop", "stream", "ignore_eos", "presence_penalty",
                           "frequency_penalty", "top_p", "min_p", "top_k", "temperature"}) {
    if (const json* v = Field(body, name)) (*oa)[name] = *v;
  }
  // A negative temperature means greedy, as zero does.
  if (const json* t = Field(body, "temperature"); t != nullptr && t->is_number() &&
                                                  t->get<double>() < 0) {
    (*oa)["temperature"] = 0;
  }
  if (!oa->contains("temperature")) (*oa)["temperature"] = kDefaultTemperature;
  if (!oa->contains("top_k")) (*oa)["top_k"] = kDefaultTopK;
  if (!oa->contains("top_p")) (*oa)["top_p"] = kDefaultTopP;
  if (!oa->contains("min_p")) (*oa)["min_p"] = kDefaultMinP;
  if (const json* s = Field(body, "seed"); s != nullptr) {
    // -1 (and llama-server's unsigned form of it) asks for a random seed.
    const bool random = (s->is_number_integer() && s->get<int64_t>() == -1) ||
                        (s->is_number_unsigned() && s->get<uint64_t>() == 0xFFFFFFFFull);
    if (!random) (*oa)["seed"] = *s;
  }
  std::optional<int64_t> n_predict;
  RETURN_IF_API_ERROR(ReadInt(body, "n_predict", -1, int64_t(1) << 30, &n_predict));
  if (n_predict == 0) {
    return InvalidField("n_predict",
                        "n_predict 0 (only evaluate the prompt) is not supported: use 1 or more, "
                        "or -1 for no limit");
  }
  if (n_predict && *n_predict > 0) {
    out->n_predict = n_predict;
    (*oa)["max_tokens"] = *n_predict;
  }
  std::optional<int64_t> n_probs;
  RETURN_IF_API_ERROR(ReadInt(body, "n_probs", 0, limits.base.max_top_logprobs, &n_probs));
  out->n_probs = int(n_probs.value_or(0));
  if (out->n_probs > 0) (*oa)["logprobs"] = out->n_probs;
  if (const json* b = Field(body, "logit_bias")) {
    json bias;
    RETURN_IF_API_ERROR(TranslateLogitBias(*b, &bias));
    (*oa)["logit_bias"] = std::move(bias);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadSamplers(const json& body, NativeRequest* out) {
  const json* v = Field(body, "samplers");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array() || v->size() > 32) {
    return InvalidField("samplers", "samplers must be an array of at most 32 sampler names",
                        "invalid_type");
  }
  for (const json& s : *v) {
    if (!s.is_string() || std::find(kSamplerNames.begin(), kSamplerNames.end(),
                                     s.get_ref<const std::string&>()) == kSamplerNames.end()) {
      return InvalidField("samplers",
                          "samplers names must be among penalties, dry, top_n_sigma, top_k, "
                          "typ_p, top_p, min_p, xtc, temperature, infill");
    }
    out->samplers.push_back(s.get<std::string>());
  }
  // A sampler left out of the list is not applied (its setting is ignored).
  const auto has = [out](std::string_view name) {
    return std::find(out->samplers.begin(), out->samplers.end(), name) != out->samplers.end();
  };
  SamplingParams& p = out->request.sampling;
  if (!has("top_k")) p.top_k = 0;
  if (!has("top_p")) p.top_p = 1.0f;
  if (!has("min_p")) p.min_p = 0.0f;
  if (!has("penalties")) p.repetition_penalty = 1.0f;
  if (!has("temperature")) p.temperature = 1.0f;  // the softmax of the raw logits
  return std::nullopt;
}

std::optional<ApiError> ReadResponseFields(const json& body, const NativeLimits& limits,
                                           NativeRequest* out) {
  const json* v = Field(body, "response_fields");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array() || v->size() > limits.max_response_fields) {
    return InvalidField("response_fields",
                        "response_fields must be an array of at most " +
                            std::to_string(limits.max_response_fields) + " field names",
                        "invalid_type");
  }
  for (const json& f : *v) {
    if (!f.is_string() || f.get_ref<const std::string&>().size() > 128) {
      return InvalidField("response_fields", "response_fields entries must be short strings");
    }
    out->response_fields.push_back(f.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> ReadInfillFields(const json& body, const NativeLimits& limits,
                                         NativeRequest* out) {
  for (auto [name, field] : {std::pair{"input_prefix", &out->input_prefix},
                             std::pair{"input_suffix", &out->input_suffix}}) {
    if (const json* v = Field(body, name)) {
      if (!v->is_string()) {
        return InvalidField(name, std::string(name) + " must be a string", "invalid_type");
      }
      *field = v->get<std::string>();
    }
  }
  const json* extra = Field(body, "input_extra");
  if (extra == nullptr) return std::nullopt;
  if (!extra->is_array() || extra->size() > limits.max_infill_chunks) {
    return InvalidField("input_extra",
                        "input_extra must be an array of at most " +
                            std::to_string(limits.max_infill_chunks) +
                            " {\"filename\", \"text\"} objects",
                        "invalid_type");
  }
  for (const json& chunk : *extra) {
    InfillChunk c;
    if (!chunk.is_object()) {
      return InvalidField("input_extra", "input_extra entries must be objects", "invalid_type");
    }
    for (auto [name, field] :
         {std::pair{"filename", &c.filename}, std::pair{"text", &c.text}}) {
      if (const json* v = Field(chunk, name)) {
        if (!v->is_string()) {
          return InvalidField(std::string("input_extra.") + name,
                              std::string("input_extra.") + name + " must be a string",
                              "invalid_type");
        }
        *field = v->get<std::string>();
      }
    }
    out->input_extra.push_back(std::move(c));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseNativeRequest(const json& body, bool infill,
                                           const NativeLimits& limits, NativeRequest* out) {
  if (!body.is_object()) return InvalidField("", "the request body must be a JSON object");
  *out = NativeRequest{};
  out->infill = infill;
  RETURN_IF_API_ERROR(CheckNeutralFields(body));
  json oa;
  RETURN_IF_API_ERROR(TranslateToCompletions(body, limits, out, &oa));
  RETURN_IF_API_ERROR(ParseCompletionRequest(oa, /*chat=*/false, limits.base, &out->request));
  out->request.prompt_text.clear();

  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr && !infill) return InvalidField("prompt", "prompt is required");
  if (prompt != nullptr) RETURN_IF_API_ERROR(ReadPromptPieces(*prompt, "prompt", limits, &out->prompt));
  if (infill) RETURN_IF_API_ERROR(ReadInfillFields(body, limits, out));

  std::optional<int64_t> last_n;
  RETURN_IF_API_ERROR(ReadInt(body, "repeat_last_n", -1, int64_t(1) << 30, &last_n));
  if (last_n) out->request.sampling.repeat_last_n = int(*last_n);
  RETURN_IF_API_ERROR(
      ReadNumber(body, "repeat_penalty", 0, 10, true, &out->request.sampling.repetition_penalty));
  RETURN_IF_API_ERROR(ReadSamplers(body, out));
  RETURN_IF_API_ERROR(ReadBool(body, "return_tokens", &out->return_tokens));
  RETURN_IF_API_ERROR(ReadBool(body, "cache_prompt", &out->cache_prompt));
  RETURN_IF_API_ERROR(ReadResponseFields(body, limits, out));
  // Accepted and not applied (they tune llama-server's own slots and
  // timing): n_keep, n_indent, t_max_prompt_ms, t_max_predict_ms, id_slot,
  // min_keep, timings_per_token. Their types are still checked.
  for (const char* name : {"n_keep", "n_indent", "t_max_prompt_ms", "t_max_predict_ms", "id_slot",
                           "min_keep"}) {
    std::optional<int64_t> ignored;
    RETURN_IF_API_ERROR(ReadInt(body, name, -1, int64_t(1) << 40, &ignored));
  }
  bool timings_per_token = false;
  RETURN_IF_API_ERROR(ReadBool(body, "timings_per_token", &timings_per_token));

  if (const json* s = Field(body, "json_schema")) {
    if (!s->is_object()) {
      return InvalidField("json_schema", "json_schema must be an object", "invalid_type");
    }
    out->json_schema = nlohmann::ordered_json::parse(s->dump());
  }
  RETURN_IF_API_ERROR(ReadGrammar(body, &out->request.grammar));
  if (!out->request.grammar.empty() && out->json_schema) {
    return InvalidField("grammar", "grammar and json_schema cannot be combined; send one",
                        "grammar_and_json_schema");
  }
  return std::nullopt;
}

std::optional<ApiError> NativePromptTokens(const NativeRequest& request, const Tokenizer& tokenizer,
                                           std::vector<int32_t>* out) {
  out->clear();
  const auto append_text = [&](std::string_view text) {
    const std::vector<int32_t> ids = tokenizer.Encode(text, false, /*parse_special=*/true);
    out->insert(out->end(), ids.begin(), ids.end());
  };
  const bool add_bos = tokenizer.add_bos_default() && tokenizer.bos_id() >= 0;
  const auto append_prompt = [&] {
    for (const NativePromptPiece& p : request.prompt) {
      if (p.is_text) {
        append_text(p.text);
      } else {
        out->insert(out->end(), p.ids.begin(), p.ids.end());
      }
    }
  };
  if (!request.infill) {
    if (add_bos && !request.prompt.empty() && request.prompt[0].is_text) {
      out->push_back(tokenizer.bos_id());
    }
    append_prompt();
    return std::nullopt;
  }
  const std::optional<FimTokens> fim = FindFimTokens(tokenizer);
  if (!fim) {
    return InvalidField("input_prefix",
                        "this model has no fill-in-the-middle tokens (prefix, suffix and middle): "
                        "/infill needs a code model trained for FIM",
                        "fim_unsupported");
  }
  if (add_bos) out->push_back(tokenizer.bos_id());
  // Context files: the repository layout where the model has its tokens,
  // else their text before the prefix.
  if (!request.input_extra.empty() && fim->repo >= 0 && fim->file_sep >= 0) {
    out->push_back(fim->repo);
    append_text("project\n");
    for (const InfillChunk& c : request.input_extra) {
      out->push_back(fim->file_sep);
      append_text(c.filename + "\n" + c.text);
    }
  } else {
    for (const InfillChunk& c : request.input_extra) append_text(c.text);
  }
  out->push_back(fim->prefix);
  append_text(request.input_prefix);
  out->push_back(fim->suffix);
  append_text(request.input_suffix);
  out->push_back(fim->middle);
  append_prompt();
  return std::nullopt;
}

}  // namespace anymoe
