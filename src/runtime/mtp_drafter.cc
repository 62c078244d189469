#include "runtime/mtp_drafter.h"

#include "runtime/sampler.h"

namespace anymoe {

MtpDrafter::MtpDrafter(Model& model) : model_(model) {
  logits_.resize(size_t(model.config().vocab_size));
}

Expected<Tensor> MtpDrafter::Gather(const Tensor& source, std::span<const int32_t> rows) {
  const int64_t h = model_.config().hidden_size;
  if (gathered_.bytes() == 0) {
    RETURN_IF_ERROR(
        gathered_.Allocate(model_.backend(), Workspace::Footprint(model_.max_step_tokens(), h)));
  }
  gathered_.Reset();
  const Tensor out = gathered_.Take(int64_t(rows.size()), h);
  model_.backend().GatherRows(source, rows, out);
  return out;
}

Status MtpDrafter::Settle(std::span<MtpSettle* const> settles, const Tensor& hidden) {
  if (settles.empty()) return Status::Ok();
  rows_.clear();
  steps_.clear();
  for (MtpSettle* s : settles) {
    s->draft->clear();
    if (s->cache->length() != s->first) {
      return Status::Error("MTP cache out of step: " + std::to_string(s->cache->length()) +
                           " rows, the trunk's step starts at " + std::to_string(s->first));
    }
    for (size_t i = 0; i < s->next.size(); ++i)
      rows_.push_back(int32_t(s->hidden_row + int64_t(i)));
    steps_.push_back({s->next, s->cache, /*all_logits=*/false});
  }
  ASSIGN_OR_RETURN(const Tensor input, Gather(hidden, rows_));
  ASSIGN_OR_RETURN(Tensor logits, model_.ForwardMtp(steps_, input));
  settled_.clear();
  for (MtpSettle* s : settles) settled_.push_back(s->cache->length());
  // Row i of `logits` (and of last_hidden()) belongs to drafting_[i].
  drafting_.assign(settles.begin(), settles.end());
  while (!drafting_.empty()) {
    // Greedy drafts: a point-mass proposal, for which runtime/speculative.h's
    // rule is exact, sampling or not.
    rows_.clear();
    tokens_.clear();
    size_t kept = 0;
    for (size_t i = 0; i < drafting_.size(); ++i) {
      MtpSettle* s = drafting_[i];
      if (int64_t(s->draft->size()) >= s->max_draft) continue;
      model_.backend().ReadF32(logits.RowSlice(int64_t(i), 1), logits_);
      s->draft->push_back(Sampler::Argmax(logits_));
      // Another guess only while it is wanted and its row fits the cache.
      if (int64_t(s->draft->size()) == s->max_draft || s->cache->length() >= s->cache->capacity()) {
        continue;
      }
      drafting_[kept++] = s;
      rows_.push_back(int32_t(i));
      tokens_.push_back(s->draft->back());
    }
    drafting_.resize(kept);
    if (drafting_.empty()) break;
    steps_.clear();
    for (size_t i = 0; i < drafting_.size(); ++i) {
      steps_.push_back({std::span(tokens_).subspan(i, 1), drafting_[i]->cache, false});
    }
    auto guess_input = Gather(model_.last_hidden(), rows_);
    if (!guess_input.ok()) break;
    auto more = model_.ForwardMtp(steps_, *guess_input);
    if (!more.ok()) break;  // fewer drafts
    logits = *more;
  }
  // The guesses' rows are not the trunk's.
  for (size_t i = 0; i < settles.size(); ++i) settles[i]->cache->set_length(settled_[i]);
  return Status::Ok();
}

}  // namespace anymoe
