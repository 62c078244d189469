// llama-server's native POST /completion and POST /infill bodies, read into
// the server's one request model (CompletionRequest: sampling, stop strings,
// budget, logprobs, stream) by translating them into an OpenAI completions
// body that ParseCompletionRequest checks, plus what only this API has: a
// prompt of text and token-id pieces, the infill fields, the sampler list,
// the repetition penalty, and how the answer is shaped (return_tokens,
// n_probs, response_fields). Fields llama-server has and this server cannot
// honour are accepted only at their neutral value (400 naming them otherwise).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/request_params.h"

namespace anymoe {

class Tokenizer;

// One piece of a /completion prompt: text (tokenized with special tokens
// parsed) or token ids, in the order the client sent them.
struct NativePromptPiece {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

// A file of /infill's input_extra (context from elsewhere in the project).
struct InfillChunk {
  std::string filename;
  std::string text;
};

struct NativeRequest {
  CompletionRequest request;  // prompt fields unused: see `prompt`
  bool infill = false;
  // /completion: the prompt; /infill: the text after the middle token.
  std::vector<NativePromptPiece> prompt;
  std::string input_prefix, input_suffix;  // /infill
  std::vector<InfillChunk> input_extra;    // /infill
  // n_predict; nullopt (-1): until a stop or the end of the context.
  std::optional<int64_t> n_predict;
  bool return_tokens = false;
  bool cache_prompt = true;  // accepted; the prefix cache is always on
  int n_probs = 0;           // top alternatives per generated token (0: none)
  std::vector<std::string> samplers;  // as sent (empty: the default chain)
  std::vector<std::string> response_fields;  // empty: every field
  // Top-level json_schema (an object): constrained decoding, as
  // response_format json_schema in chat completions.
  std::optional<nlohmann::ordered_json> json_schema;
};

struct NativeLimits {
  RequestLimits base;
  size_t max_prompt_pieces = 4096;
  size_t max_infill_chunks = 256;
  size_t max_response_fields = 64;
};

// Fills `out` from `body` (a parsed JSON value) or returns the first error.
std::optional<ApiError> ParseNativeRequest(const nlohmann::json& body, bool infill,
                                           const NativeLimits& limits, NativeRequest* out);

// The prompt's token ids: /completion's pieces in order (BOS first when the
// model adds one and the prompt starts with text), or /infill's
// [extra] PRE prefix SUF suffix MID prompt with the model's FIM tokens (a 400
// "fim_unsupported" when it has none).
std::optional<ApiError> NativePromptTokens(const NativeRequest& request, const Tokenizer& tokenizer,
                                           std::vector<int32_t>* out);

}  // namespace anymoe
