// The JSON of llama-server's native /completion and /infill answers: the
// whole body (content, tokens, stop_type, stopping_word, timings,
// tokens_predicted / tokens_evaluated / tokens_cached, generation_settings,
// completion_probabilities), its stream chunks (a data: line per piece of
// text, the last with "stop": true and the whole body's fields, no [DONE]),
// and response_fields (a field list, "a/b" lifting b out of a).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generator.h"
#include "server/native_request.h"
#include "server/openai_format.h"

namespace anymoe {

class Tokenizer;

// How a generation went, for the final body.
struct NativeResult {
  std::string content;
  std::vector<int32_t> tokens;           // every generated id
  std::span<const TokenLogprob> probs;   // when n_probs > 0
  StopReason reason = StopReason::kMaxTokens;
  std::string stopping_word;             // kStopString
  std::string prompt;                    // the prompt's text as tokenized
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double prompt_ms = 0;     // prefill
  double predicted_ms = 0;  // the decode steps
};

// "eos", "limit" or "word" (llama-server's stop_type).
std::string_view NativeStopType(StopReason reason);

class NativeFormatter {
 public:
  // `request`'s settings are copied: the formatter outlives nothing of it.
  NativeFormatter(const Tokenizer& tokenizer, const NativeRequest& request, std::string model,
                  int64_t n_ctx, int64_t n_predict);

  // A streamed piece of text, from the generated `tokens` (with their
  // probabilities when n_probs > 0). `predicted`: generated so far.
  nlohmann::json Chunk(std::string_view text, std::span<const int32_t> tokens,
                       std::span<const TokenLogprob> probs, int64_t predicted,
                       int64_t prompt_tokens) const;
  // The whole answer (streamed: the last chunk, whose content is `result.content`).
  nlohmann::json Final(const NativeResult& result, bool streamed) const;

 private:
  nlohmann::json Probs(std::span<const TokenLogprob> probs) const;
  nlohmann::json Entry(int32_t id, float logprob) const;
  nlohmann::json Select(nlohmann::json body) const;  // response_fields

  const Tokenizer& tokenizer_;
  std::string model_;
  nlohmann::json settings_;
  bool return_tokens_;
  int n_probs_;
  std::vector<std::string> response_fields_;
};

}  // namespace anymoe
