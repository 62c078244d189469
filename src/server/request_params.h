// The fields of an OpenAI /v1/completions or /v1/chat/completions request,
// type- and range-checked before anything is tokenized or queued. Every bad
// field is a 400 that names it (reliability.md §1.1 "server request fields",
// C1-C3). Unknown fields are ignored, as OpenAI-compatible servers do.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "server/api_error.h"
#include "server/chat_params.h"
#include "tokenizer/chat_template.h"

namespace anymoe {

struct RequestLimits {
  int64_t vocab_size = 0;  // prompt token ids must be in [0, vocab_size)
  int max_stop_strings = 16;
  size_t max_stop_bytes = 256;  // per stop string
  int max_top_logprobs = 20;
  size_t max_messages = 4096;
  int max_n = 16;                  // choices per request
  size_t max_logit_bias = 1024;    // entries of logit_bias
  size_t max_tools = 128;
};

struct CompletionRequest {
  bool chat = false;
  // /v1/completions: the prompt as text, or as token ids when prompt_is_ids.
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  // /v1/chat/completions: the messages as plain text (for the built-in
  // renderers) and as the template sees them (chat_params.h).
  std::vector<ChatMessage> messages;
  ChatParams chat_params;
  // /v1/completions: the prompt's text comes back before the generated text.
  bool echo = false;
  // Choices per request, each its own sequence through the scheduler.
  int n = 1;
  // Added to the logits of these token ids before sampling (-100..100).
  std::vector<std::pair<int32_t, float>> logit_bias;

  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens
  SamplingParams sampling;            // OpenAI defaults: temperature 1, top_p 1, no top-k/min-p
  std::optional<uint64_t> seed;       // absent: a random seed per request
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // llama-server's extension: do not stop at end-of-sequence
  bool logprobs = false;       // return each token's log-probability
  int top_logprobs = 0;        // and the k most likely alternatives
  // llama-server's `grammar`: a GBNF grammar the output must be a sentence
  // of (chat/grammar_constraint.h); empty: none.
  std::string grammar;
};

// A boolean field into `out` (left as is when absent or null).
std::optional<ApiError> ReadBool(const nlohmann::json& body, const char* name, bool* out);
// An integer field in [lo, hi] into `out` (left as is when absent or null).
std::optional<ApiError> ReadInt(const nlohmann::json& body, const char* name, int64_t lo,
                                int64_t hi, std::optional<int64_t>* out);
// A number field in [lo, hi], or (lo, hi] when `open_low`, into `out`.
std::optional<ApiError> ReadNumber(const nlohmann::json& body, const char* name, double lo,
                                   double hi, bool open_low, float* out);
// `grammar` (a string; empty or absent: none) into `out`.
std::optional<ApiError> ReadGrammar(const nlohmann::json& body, std::string* out);
// Every element of `array` a token id in [0, vocab_size), into `out`; errors name `name`.
std::optional<ApiError> ReadTokenIds(const nlohmann::json& array, const char* name,
                                     int64_t vocab_size, std::vector<int32_t>* out);

// Fills `out` from `body` (a parsed JSON value) or returns the first error.
// `ordered`: the same body with its keys in the client's order (what a chat
// template renders: tools, messages, schemas); null: `body` converted.
std::optional<ApiError> ParseCompletionRequest(const nlohmann::json& body, bool chat,
                                               const RequestLimits& limits, CompletionRequest* out,
                                               const nlohmann::ordered_json* ordered = nullptr);

}  // namespace anymoe
