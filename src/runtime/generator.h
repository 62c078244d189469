// The generation loop of one sequence (`run`, `chat`, `bench`): prefill a
// prompt in chunks, then decode token by token, streaming complete UTF-8 text.
// The per-step rules (drafting, verification, rollback, stopping on stop
// tokens, stop strings, the token budget, a full context or the caller's
// request) are runtime/decoding_sequence.h's, the same the serving scheduler
// runs; this loop adds the prefix reuse of a conversation's Sequence.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_constraint.h"
#include "models/model.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "runtime/speculative.h"

namespace anymoe {

class MtpDrafter;
class Tokenizer;

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;       // end of generation (EOS, end-of-turn)
  std::vector<std::string> stop_strings;  // cut the text before the first match
  bool record_logits = false;             // keep each step's logits (f32)
  // Structured output: masks each step's logits so the text is one the
  // constraint (JSON schema, GBNF grammar) accepts, closed within
  // max_new_tokens; generation stops once the output is complete. Not owned; null: unconstrained.
  ConstraintState* constraint = nullptr;
  // Drafted tokens verified several per forward step (runtime/speculative.h);
  // the tokens are those of plain decoding (bitwise, greedy or seeded).
  SpeculativeOptions spec;
  // Added to these tokens' logits before sampling (OpenAI logit_bias).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// Adds `bias` to `logits` (ids outside the vocabulary are ignored).
void ApplyLogitBias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

enum class StopReason { kMaxTokens, kStopToken, kStopString, kContextFull, kCancelled };
std::string_view StopReasonName(StopReason r);

struct GenerateStats {
  int64_t prompt_tokens = 0;    // tokens prefilled (after prefix reuse)
  int64_t reused_tokens = 0;    // prompt tokens already in the cache
  int64_t generated_tokens = 0;
  double prompt_seconds = 0;    // prefill time
  double decode_seconds = 0;    // time of the decode steps after the first token
  double ttft_seconds = 0;      // start to first token sampled
  int64_t decode_steps = 0;     // forward steps after the prefill
  int64_t drafted_tokens = 0;   // speculative drafts verified
  int64_t accepted_tokens = 0;  // drafts the model agreed with
  double acceptance() const {
    return drafted_tokens > 0 ? double(accepted_tokens) / double(drafted_tokens) : 0;
  }
  double prompt_tps() const { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  // Decode steps per second (the first token comes from the prefill).
  double gen_tps() const {
    return decode_seconds > 0 ? double(generated_tokens - 1) / decode_seconds : 0;
  }
  std::string Line() const;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token is included)
  std::string text;             // generated text, cut before a stop string
  StopReason reason = StopReason::kMaxTokens;
  GenerateStats stats;
  std::vector<float> logits;    // [steps, vocab] when record_logits
};

// Receives each new piece of text; return false to cancel generation.
using TextCallback = std::function<bool(std::string_view)>;

class Generator {
 public:
  // `tokenizer` may be null (token ids only, no text).
  Generator(Model& model, const Tokenizer* tokenizer);
  ~Generator();

  // A fresh sequence with room for `capacity` tokens.
  Expected<Sequence> NewSequence(int64_t capacity);

  // Continues `seq` with `prompt` (the whole conversation so far; the common
  // prefix with seq.tokens is reused) and generates.
  Expected<GenerateResult> Generate(Sequence& seq, std::span<const int32_t> prompt,
                                    const GenerateOptions& options, const TextCallback& on_text);

 private:
  Model& model_;
  const Tokenizer* tokenizer_;
  std::vector<float> step_logits_;
  std::unique_ptr<MtpDrafter> mtp_;  // made for the first --spec mtp request
};

}  // namespace anymoe
