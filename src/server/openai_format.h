// The JSON bodies of OpenAI completion and chat-completion responses: whole
// responses, stream chunks, usage and both logprobs shapes (chat's
// {"content": [{token, logprob, bytes, top_logprobs}]} and completions'
// {tokens, token_logprobs, top_logprobs, text_offset}).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/generator.h"

namespace anymoe {

class Tokenizer;

// One generated token, for logprobs.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
  size_t text_offset = 0;  // where its text starts in the generated text
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens served from the prefix cache (OpenAI's
  // prompt_tokens_details.cached_tokens, sent when > 0).
  int64_t cached_tokens = 0;
};

// "stop" (stop token or string) or "length" (max_tokens or the context).
std::string_view FinishReason(StopReason reason);

class OpenAiFormatter {
 public:
  // `tokenizer` turns ids into token text for logprobs.
  OpenAiFormatter(const Tokenizer& tokenizer, std::string id, int64_t created, std::string model,
                  bool chat, bool logprobs, bool usage_in_stream);

  // Chat streams open with {"delta": {"role": "assistant", "content": ""}}.
  nlohmann::json RoleChunk() const;
  // A piece of streamed text and the tokens it came from; `finish` ends the choice.
  nlohmann::json Chunk(std::string_view text, std::span<const TokenLogprob> tokens,
                       std::optional<std::string_view> finish) const;
  // The last chunk with stream_options.include_usage: no choices, only usage.
  nlohmann::json UsageChunk(const Usage& usage) const;
  // A whole (non-streamed) response.
  nlohmann::json Response(std::string_view text, std::span<const TokenLogprob> tokens,
                          std::string_view finish, const Usage& usage) const;

  // Choice `index` of n: a chunk whose `delta` (chat) or `text` (completions)
  // is `payload`, and a whole choice whose `message` or `text` it is.
  nlohmann::json ChoiceChunk(size_t index, nlohmann::json payload,
                             std::span<const TokenLogprob> tokens,
                             std::optional<std::string_view> finish) const;
  nlohmann::json RoleChunk(size_t index) const;
  nlohmann::json Choice(size_t index, nlohmann::json payload, std::span<const TokenLogprob> tokens,
                        std::string_view finish) const;
  nlohmann::json Response(nlohmann::json choices, const Usage& usage) const;

 private:
  nlohmann::json Envelope(const char* object) const;
  nlohmann::json Logprobs(std::span<const TokenLogprob> tokens) const;
  std::string Piece(int32_t token) const;

  const Tokenizer& tokenizer_;
  std::string id_;
  int64_t created_;
  std::string model_;
  bool chat_;
  bool logprobs_;
  bool usage_in_stream_;
};

nlohmann::json UsageJson(const Usage& usage);

// OpenAI's system_fingerprint, sent on every completion and chunk: names the
// serving configuration (here: this engine serving `model`).
std::string SystemFingerprint(std::string_view model);

}  // namespace anymoe
