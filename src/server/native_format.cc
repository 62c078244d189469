#include "server/native_format.h"

#include "tokenizer/tokenizer.h"

namespace anymoe {

using nlohmann::json;

std::string_view NativeStopType(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "eos";
    case StopReason::kStopString:
      return "word";
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
    case StopReason::kCancelled:
      break;
  }
  return "limit";
}

NativeFormatter::NativeFormatter(const Tokenizer& tokenizer, const NativeRequest& request,
                                 std::string model, int64_t n_ctx, int64_t n_predict)
    : tokenizer_(tokenizer),
      model_(std::move(model)),
      return_tokens_(request.return_tokens),
      n_probs_(request.n_probs),
      response_fields_(request.response_fields) {
  const CompletionRequest& r = request.request;
  const SamplingParams& s = r.sampling;
  json samplers = json::array();
  for (const std::string& name : request.samplers) samplers.push_back(name);
  if (request.samplers.empty()) samplers = {"penalties", "top_k", "top_p", "min_p", "temperature"};
  settings_ = {
      {"n_ctx", n_ctx},
      {"model", model_},
      {"n_predict", request.n_predict.value_or(-1)},
      {"max_tokens", n_predict},
      {"seed", r.seed ? json(*r.seed) : json(-1)},
      {"temperature", s.temperature},
      {"top_k", s.top_k},
      {"top_p", s.top_p},
      {"min_p", s.min_p},
      {"repeat_penalty", s.repetition_penalty},
      {"repeat_last_n", s.repeat_last_n},
      {"stop", r.stop},
      {"ignore_eos", r.ignore_eos},
      {"stream", r.stream},
      {"n_probs", request.n_probs},
      {"samplers", std::move(samplers)},
      {"cache_prompt", request.cache_prompt},
      {"grammar", r.grammar},
  };
  if (request.json_schema) settings_["json_schema"] = json::parse(request.json_schema->dump());
}

json NativeFormatter::Entry(int32_t id, float logprob) const {
  const std::string piece(tokenizer_.TokenPiece(id));
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return {{"id", id}, {"token", piece}, {"bytes", std::move(bytes)}, {"logprob", logprob}};
}

json NativeFormatter::Probs(std::span<const TokenLogprob> probs) const {
  json out = json::array();
  for (const TokenLogprob& t : probs) {
    json e = Entry(t.token, t.logprob);
    json top = json::array();
    for (const auto& [id, lp] : t.top) top.push_back(Entry(id, lp));
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

json NativeFormatter::Chunk(std::string_view text, std::span<const int32_t> tokens,
                            std::span<const TokenLogprob> probs, int64_t predicted,
                            int64_t prompt_tokens) const {
  json chunk = {{"index", 0},
                {"content", std::string(text)},
                {"tokens", std::vector<int32_t>(tokens.begin(), tokens.end())},
                {"stop", false},
                {"id_slot", 0},
                {"tokens_predicted", predicted},
                {"tokens_evaluated", prompt_tokens}};
  if (n_probs_ > 0) chunk["completion_probabilities"] = Probs(probs);
  return chunk;
}

json NativeFormatter::Final(const NativeResult& r, bool streamed) const {
  const int64_t predicted = int64_t(r.tokens.size());
  const auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / double(n) : 0.0; };
  const auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1e3 * double(n) / ms : 0.0; };
  const int64_t prompt_n = r.prompt_tokens - r.cached_tokens;
  json body = {
      {"index", 0},
      {"content", r.content},
      {"tokens", return_tokens_ && !streamed ? r.tokens : std::vector<int32_t>{}},
      {"id_slot", 0},
      {"stop", true},
      {"model", model_},
      {"tokens_predicted", predicted},
      {"tokens_evaluated", r.prompt_tokens},
      {"generation_settings", settings_},
      {"prompt", r.prompt},
      {"has_new_line", r.content.find('\n') != std::string::npos},
      {"truncated", r.reason == StopReason::kContextFull},
      {"stop_type", NativeStopType(r.reason)},
      {"stopping_word", r.stopping_word},
      {"tokens_cached", r.cached_tokens},
      {"timings",
       {{"cache_n", r.cached_tokens},
        {"prompt_n", prompt_n},
        {"prompt_ms", r.prompt_ms},
        {"prompt_per_token_ms", per_token(r.prompt_ms, prompt_n)},
        {"prompt_per_second", per_second(r.prompt_ms, prompt_n)},
        {"predicted_n", predicted},
        {"predicted_ms", r.predicted_ms},
        {"predicted_per_token_ms", per_token(r.predicted_ms, predicted)},
        {"predicted_per_second", per_second(r.predicted_ms, predicted)}}},
  };
  if (n_probs_ > 0) body["completion_probabilities"] = streamed ? json::array() : Probs(r.probs);
  return Select(std::move(body));
}

json NativeFormatter::Select(json body) const {
  if (response_fields_.empty()) return body;
  json out = json::object();
  for (const std::string& field : response_fields_) {
    const size_t slash = field.find('/');
    if (slash == std::string::npos) {
      if (body.contains(field)) out[field] = body[field];
      continue;
    }
    // "a/b": b of object a, under the name b (a missing field is left out).
    const std::string outer = field.substr(0, slash), inner = field.substr(slash + 1);
    if (body.contains(outer) && body[outer].is_object() && body[outer].contains(inner)) {
      out[inner] = body[outer][inner];
    }
  }
  return out;
}

}  // namespace anymoe
