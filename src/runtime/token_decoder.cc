#include "runtime/token_decoder.h"

#include <algorithm>

#include "chat/output_constraint.h"
#include "runtime/logit_guard.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {

TokenDecoder::TokenDecoder(const GenerateOptions& options, ConstraintState* constraint,
                           const Tokenizer* tokenizer)
    : max_new_tokens_(options.max_new_tokens),
      stop_tokens_(options.stop_tokens),
      logit_bias_(options.logit_bias),
      sampler_(options.sampling),
      text_(options.stop_strings),
      constraint_(constraint),
      tokenizer_(tokenizer) {}

Status TokenDecoder::Prepare(std::span<float> logits) const {
  RETURN_IF_ERROR(CheckLogitsFinite(logits));
  ApplyLogitBias(logits, logit_bias_);
  return Status::Ok();
}

Expected<DecodedToken> TokenDecoder::Choose(std::span<float> logits,
                                            std::span<const int32_t> history, int32_t draft,
                                            int64_t remaining) {
  if (constraint_ != nullptr) RETURN_IF_ERROR(constraint_->ApplyMask(logits, remaining));
  // A draft is judged against the distribution the constraint leaves, so an
  // accepted draft is a token the constraint allows.
  const DraftVerdict verdict = VerifyDraftRow(sampler_, logits, history, draft);
  DecodedToken out;
  out.token = verdict.token;
  out.accepted = verdict.accepted;
  if (constraint_ != nullptr) RETURN_IF_ERROR(constraint_->Accept(out.token));
  ++generated_;
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), out.token) != stop_tokens_.end()) {
    out.stop = StopReason::kStopToken;
    return out;
  }
  if (tokenizer_ != nullptr) out.text = text_.Append(tokenizer_->TokenPiece(out.token));
  if (text_.stopped()) {
    out.stop = StopReason::kStopString;
  } else if (constraint_ != nullptr && constraint_->IsComplete()) {
    out.stop = StopReason::kStopToken;
  } else if (generated_ >= max_new_tokens_) {
    out.stop = StopReason::kMaxTokens;
  }
  return out;
}

}  // namespace anymoe
