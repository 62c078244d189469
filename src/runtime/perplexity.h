// The quality meter: perplexity over a text as llama.cpp's llama-perplexity
// measures it, and the KL divergence of one run's next-token distributions
// from a saved base run's. The text is cut into chunks of `context` tokens
// (the first one BOS when the model adds BOS); each chunk runs from an empty
// cache and only its second half is scored, so every scored token has at least
// context/2 tokens before it. Same chunks, same statistics and the same
// base-logits file layout as llama.cpp, so the numbers compare side by side.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model.h"

namespace anymoe {

struct PerplexityOptions {
  int64_t context = 512;  // tokens per chunk
  int64_t chunks = -1;    // at most this many chunks (-1: all the text holds)
  int32_t bos_id = -1;    // replaces each chunk's first token (-1: none)
  // Writes the scored rows' log-probabilities here (the KLD base).
  std::string save_base;
};

// A value with its standard error (one standard deviation of the mean).
struct Estimate {
  double value = 0, error = 0;
};

struct KlDivergenceStats {
  Estimate ppl_base;       // the base run's perplexity on the same tokens
  Estimate ln_ppl_ratio;   // mean ln(PPL(this) / PPL(base))
  Estimate kld;            // mean KL(base || this) per scored token, nats
  double kld_median = 0, kld_p99 = 0, kld_p999 = 0, kld_max = 0;
  Estimate same_top;       // fraction of tokens whose argmax agrees with the base
  Estimate rms_dp;         // RMS of p(token) - p_base(token)
};

struct PerplexityResult {
  int64_t chunks = 0, context = 0;
  int64_t scored = 0;              // tokens scored (context - 1 - context/2 per chunk)
  Estimate ppl;
  std::vector<double> running_ppl;  // after each chunk
  std::optional<KlDivergenceStats> kld;
};

// Called after each chunk (chunk index, running perplexity).
using ChunkCallback = std::function<void(int64_t chunk, double running_ppl)>;

// Perplexity of `model` on `tokens` (the whole text, tokenized with BOS when the
// model adds one). Needs at least 2 x context tokens.
Expected<PerplexityResult> MeasurePerplexity(Model& model, std::span<const int32_t> tokens,
                                             const PerplexityOptions& options,
                                             const ChunkCallback& on_chunk = nullptr);

// KL divergence of `model` from the base run saved in `base_path`, on the
// base's own tokens and chunks (`context`/`chunks` come from the file).
Expected<PerplexityResult> MeasureKlDivergence(Model& model, const std::string& base_path,
                                               int32_t bos_id,
                                               const ChunkCallback& on_chunk = nullptr);

}  // namespace anymoe
