#include "runtime/decoding_sequence.h"

#include <algorithm>

#include "backends/backend.h"
#include "core/check.h"
#include "runtime/ngram_drafter.h"

namespace anymoe {

DecodingSequence::DecodingSequence(std::span<const int32_t> prompt, int64_t prefilled,
                                   const GenerateOptions& options, const SpeculativeOptions& spec,
                                   ConstraintState* constraint, const Tokenizer* tokenizer,
                                   int64_t context, int64_t step_tokens)
    : prompt_(prompt),
      prompt_size_(int64_t(prompt.size())),
      prefilled_(prefilled),
      context_(context),
      step_tokens_(step_tokens),
      max_new_tokens_(options.max_new_tokens),
      spec_(spec),
      governor_(spec.min_acceptance),
      decoder_(options, constraint, tokenizer),
      history_(prompt.begin(), prompt.end()) {}

std::span<const int32_t> DecodingSequence::PrefillTokens(int64_t n) {
  n = std::clamp<int64_t>(n, 1, prompt_left());
  step_is_prompt_ = true;
  step_first_ = prefilled_;
  draft_.clear();
  replay_ = 0;
  fed_.assign(prompt_.begin() + prefilled_, prompt_.begin() + prefilled_ + n);
  return fed_;
}

int64_t DecodingSequence::DraftLength(int64_t room, double row_share) {
  // The MTP layer's settle assumes a trunk cut back by length alone (RollBack
  // rebuilds a recurrent state by replay only for the trunk's own drafts).
  if (mtp() && recurrent()) return 0;
  // The step samples one token per draft plus one: the last draft may take
  // the last token of the budget; the drafts' rows must fit the context.
  const int64_t want = std::min({spec_.max_draft, room, max_new_tokens_ - generated() - 1,
                                 context_ - int64_t(history_.size())});
  return std::max<int64_t>(governor_.Allowed(want, row_share), 0);
}

std::span<const int32_t> DecodingSequence::DecodeTokens(int64_t room, double row_share) {
  draft_.clear();
  switch (spec_.kind) {
    case SpecKind::kNone:
      break;
    case SpecKind::kMtp:  // drafted when the last step settled (Consume)
      draft_.assign(mtp_draft_.begin(),
                    mtp_draft_.begin() +
                        std::min<int64_t>(std::max<int64_t>(room, 0), int64_t(mtp_draft_.size())));
      break;
    case SpecKind::kNgram:
    case SpecKind::kCallback: {
      const int64_t n = DraftLength(room - pending_replay(), row_share);
      if (n <= 0) break;
      if (spec_.kind == SpecKind::kNgram) {
        ProposeNgramDraft(history_, n, spec_.ngram, draft_);
      } else if (spec_.drafter) {
        spec_.drafter(history_, n, draft_);
        if (int64_t(draft_.size()) > n) draft_.resize(size_t(n));
      }
      break;
    }
  }
  if (spec_.on_draft && !draft_.empty()) spec_.on_draft(history_, draft_);
  step_is_prompt_ = false;
  step_first_ = cache_->length();
  // The committed tokens the cache lacks: the last one, and after a partial
  // accept on a recurrent model the accepted ones RollBack cut (replayed).
  replay_ = int64_t(history_.size()) - 1 - step_first_;
  replayed_ += replay_;
  fed_.assign(history_.begin() + step_first_, history_.end());
  fed_.insert(fed_.end(), draft_.begin(), draft_.end());
  // The state before the drafts' rows, to put back if some are rejected.
  // Without one (no memory for it) the step goes without drafts.
  if (recurrent() && !draft_.empty() && !cache_->CheckpointState().ok()) {
    fed_.resize(fed_.size() - draft_.size());
    draft_.clear();
  }
  return fed_;
}

void DecodingSequence::RollBack() {
  // The trunk keeps the committed tokens. The MTP cache needs no cut here:
  // its rows stop where the last settle put them (the drafts' guesses are
  // dropped inside MtpDrafter), and the next settle starts there.
  cache_->set_length(cached_tokens());
  // A recurrent state cannot be cut: past the committed tokens (drafts
  // rejected), the pre-step checkpoint comes back and the next step replays
  // the tokens accepted since (DecodeTokens), row by row as plain decoding.
  if (recurrent() && cache_->state_tokens() > cached_tokens()) {
    CHECK(cache_->RestoreState());
    cache_->set_length(cache_->state_tokens());
  }
}

void DecodingSequence::AskMtpSettle(int64_t judged, int32_t next, int64_t max_draft,
                                    int64_t hidden_row) {
  mtp_draft_.clear();
  settle_.cache = mtp_cache_;
  settle_.first = step_first_;
  settle_.hidden_row = hidden_row;
  settle_.next.assign(fed_.begin() + 1, fed_.begin() + judged);
  settle_.next.push_back(next);
  settle_.max_draft = max_draft;
  settle_.draft = &mtp_draft_;
}

Status DecodingSequence::Consume(Backend& backend, const Tensor& logits, int64_t row,
                                 std::span<float> scratch, TokenSink& sink, double row_share) {
  settle_.cache = nullptr;  // none asked for yet
  const int64_t n = int64_t(fed_.size());
  if (step_is_prompt_) {
    prefilled_ += n;
    if (prompt_left() > 0) {  // more chunks to go: no token yet
      // Every row is settled, the last followed by the next prompt token.
      if (mtp()) AskMtpSettle(n, prompt_[size_t(prefilled_)], 0, row);
      return Status::Ok();
    }
  }
  // A prompt's token comes from its last row. Row r of a decode step judges
  // draft r; the next row only after an accepted draft.
  const int64_t rows = all_logits() ? n : 1;
  int64_t judged = 0, agreed = 0;
  Status failed = Status::Ok();
  // Replayed rows are committed tokens: judging starts after them.
  const int64_t first = step_is_prompt_ ? rows - 1 : (all_logits() ? replay_ : 0);
  for (int64_t r = first; r < rows; ++r) {
    backend.ReadF32(logits.RowSlice(row + r, 1), scratch);
    sink.OnRow(scratch);
    if (failed = decoder_.Prepare(scratch); !failed.ok()) break;
    sink.OnPrepared(scratch);
    // Tokens this step and later may still sample: the budget, or the
    // context (a full cache still samples one last token). history_ holds
    // the committed tokens; the cache's length also counts the drafts.
    const int64_t remaining =
        std::min(max_new_tokens_ - generated(), context_ - int64_t(history_.size()) + 1);
    const int32_t draft = size_t(r - first) < draft_.size() ? draft_[size_t(r - first)] : -1;
    auto decoded = decoder_.Choose(scratch, history_, draft, remaining);
    if (!decoded.ok()) {
      failed = decoded.status();
      break;
    }
    ++judged;
    agreed += decoded->accepted;
    history_.push_back(decoded->token);
    last_cached_ = decoded->accepted;  // an accepted draft's row is in the cache
    if (!sink.OnToken(*decoded)) {
      stop_ = StopReason::kCancelled;
    } else if (decoded->stop) {
      stop_ = *decoded->stop;
    } else if (int64_t(history_.size()) > context_) {
      // The tokens in the cache once this one is fed.
      stop_ = StopReason::kContextFull;
    }
    if (stop_ || !decoded->accepted) break;
  }
  if (!step_is_prompt_) {
    ++decode_steps_;
    if (!draft_.empty()) {
      drafted_ += int64_t(draft_.size());
      accepted_ += agreed;
      governor_.Record(int64_t(draft_.size()), agreed);
    }
  }
  RollBack();
  if (!failed.ok()) return failed;
  if (mtp()) {
    // The step's judged rows are final, each followed by the next fed token,
    // the last by the token just sampled; drafts for the next step only when
    // there is one.
    // (A prompt's rows all settle.)
    AskMtpSettle(step_is_prompt_ ? n : judged, history_.back(),
                 done() ? 0 : DraftLength(step_tokens_ - 1, row_share), row);
  }
  return Status::Ok();
}

}  // namespace anymoe
