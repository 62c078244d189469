// One sequence's rules for turning a row of logits into its next token, run by
// runtime/decoding_sequence.h for the generation loop (`anymoe run`) and the
// serving scheduler alike, so that both apply the same ones in the same
// order: the logit guard, logit_bias, the output constraint's mask (JSON schema, GBNF), sampling
// (or judging a speculative draft), the constraint's step, and the stop rules
// (stop token, stop string, complete document, token budget). The context
// limit, cancellation and where the tokens go are DecodingSequence's.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "runtime/text_stream.h"

namespace anymoe {

class ConstraintState;
class Tokenizer;

struct DecodedToken {
  int32_t token = -1;
  bool accepted = false;           // it is the draft that was judged
  std::string text;                // newly releasable text (never a stop token's)
  std::optional<StopReason> stop;  // the sequence ends with this token
};

class TokenDecoder {
 public:
  // `constraint` (may be null) and `tokenizer` (null: no text, no stop
  // strings) must outlive the decoder.
  TokenDecoder(const GenerateOptions& options, ConstraintState* constraint,
               const Tokenizer* tokenizer);

  // The logit guard (non-finite logits are a "numerical_error") and
  // logit_bias: afterwards `logits` is the distribution the request samples
  // from, before any constraint (where logprobs are read).
  Status Prepare(std::span<float> logits) const;

  // The constraint's mask, then the token: sampled, or `draft` (-1: none)
  // accepted or replaced as runtime/speculative.h says; then the constraint's
  // step and the stop rules. `history`: the committed tokens (penalties);
  // `remaining`: tokens this step and later may still sample (the budget or
  // the context, whichever is smaller), so the constraint closes in time.
  Expected<DecodedToken> Choose(std::span<float> logits, std::span<const int32_t> history,
                                int32_t draft, int64_t remaining);

  // Text held back for a possible stop string, at the end of generation.
  std::string Flush() { return text_.Flush(); }
  const TextStream& text() const { return text_; }
  int64_t generated() const { return generated_; }

 private:
  int64_t max_new_tokens_;
  std::vector<int32_t> stop_tokens_;
  std::vector<std::pair<int32_t, float>> logit_bias_;
  Sampler sampler_;
  TextStream text_;
  ConstraintState* constraint_;
  const Tokenizer* tokenizer_;
  int64_t generated_ = 0;
};

}  // namespace anymoe
