#include "server/openai_format.h"

#include <cstdio>

#include "tokenizer/tokenizer.h"

namespace anymoe {

using json = nlohmann::json;

std::string_view FinishReason(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
      return "length";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "stop";
}

std::string SystemFingerprint(std::string_view model) {
  // FNV-1a of the served name: stable for one deployment, different across models.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : std::string("anymoe/") + std::string(model)) {
    h = (h ^ c) * 1099511628211ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "fp_%012llx", static_cast<unsigned long long>(h >> 16));
  return buf;
}

json UsageJson(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens > 0) j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return j;
}

OpenAiFormatter::OpenAiFormatter(const Tokenizer& tokenizer, std::string id, int64_t created,
                                 std::string model, bool chat, bool logprobs, bool usage_in_stream)
    : tokenizer_(tokenizer),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      chat_(chat),
      logprobs_(logprobs),
      usage_in_stream_(usage_in_stream) {}

std::string OpenAiFormatter::Piece(int32_t token) const {
  return std::string(tokenizer_.TokenPiece(token));
}

json OpenAiFormatter::Envelope(const char* object) const {
  return {{"id", id_},
          {"object", object},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", SystemFingerprint(model_)}};
}

json OpenAiFormatter::Logprobs(std::span<const TokenLogprob> tokens) const {
  if (!logprobs_) return nullptr;
  if (chat_) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      auto entry = [&](int32_t id, float lp) {
        const std::string piece = Piece(id);
        json bytes = json::array();
        for (unsigned char c : piece) bytes.push_back(int(c));
        return json{{"token", piece}, {"logprob", lp}, {"bytes", std::move(bytes)}};
      };
      json e = entry(t.token, t.logprob);
      json top = json::array();
      for (const auto& [id, lp] : t.top) top.push_back(entry(id, lp));
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    toks.push_back(Piece(t.token));
    lps.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[Piece(id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", std::move(toks)},
          {"token_logprobs", std::move(lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json OpenAiFormatter::RoleChunk() const { return RoleChunk(0); }

json OpenAiFormatter::RoleChunk(size_t index) const {
  json c = Envelope("chat.completion.chunk");
  c["choices"] = json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  if (usage_in_stream_) c["usage"] = nullptr;
  return c;
}

json OpenAiFormatter::ChoiceChunk(size_t index, json payload, std::span<const TokenLogprob> tokens,
                                  std::optional<std::string_view> finish) const {
  json choice = {{"index", index}};
  choice[chat_ ? "delta" : "text"] = std::move(payload);
  choice["logprobs"] = Logprobs(tokens);
  choice["finish_reason"] = finish ? json(*finish) : json(nullptr);
  json c = Envelope(chat_ ? "chat.completion.chunk" : "text_completion");
  c["choices"] = json::array({std::move(choice)});
  if (usage_in_stream_) c["usage"] = nullptr;
  return c;
}

json OpenAiFormatter::Chunk(std::string_view text, std::span<const TokenLogprob> tokens,
                            std::optional<std::string_view> finish) const {
  json payload = !chat_                     ? json(text)
                 : text.empty() && finish ? json::object()
                                          : json{{"content", text}};
  return ChoiceChunk(0, std::move(payload), tokens, finish);
}

json OpenAiFormatter::UsageChunk(const Usage& usage) const {
  json c = Envelope(chat_ ? "chat.completion.chunk" : "text_completion");
  c["choices"] = json::array();
  c["usage"] = UsageJson(usage);
  return c;
}

json OpenAiFormatter::Choice(size_t index, json payload, std::span<const TokenLogprob> tokens,
                             std::string_view finish) const {
  json choice = {{"index", index}};
  choice[chat_ ? "message" : "text"] = std::move(payload);
  choice["logprobs"] = Logprobs(tokens);
  choice["finish_reason"] = finish;
  return choice;
}

json OpenAiFormatter::Response(json choices, const Usage& usage) const {
  json r = Envelope(chat_ ? "chat.completion" : "text_completion");
  r["choices"] = std::move(choices);
  r["usage"] = UsageJson(usage);
  return r;
}

json OpenAiFormatter::Response(std::string_view text, std::span<const TokenLogprob> tokens,
                               std::string_view finish, const Usage& usage) const {
  json payload = chat_ ? json{{"role", "assistant"}, {"content", text}} : json(text);
  return Response(json::array({Choice(0, std::move(payload), tokens, finish)}), usage);
}

}  // namespace anymoe
