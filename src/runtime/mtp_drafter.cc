#include "runtime/mtp_drafter.h"

#include "runtime/sampler.h"

namespace anymoe {

MtpDrafter::MtpDrafter(Model& model) : model_(model) {
  logits_.resize(size_t(model.config().vocab_size));
}

Status MtpDrafter::Step(KvCache& cache, int64_t first, const Tensor& hidden,
                        std::span<const int32_t> next, int64_t max_draft,
                        std::vector<int32_t>& draft) {
  draft.clear();
  if (cache.length() != first) {
    return Status::Error("MTP cache out of step: " + std::to_string(cache.length()) +
                         " rows, the trunk's step starts at " + std::to_string(first));
  }
  ASSIGN_OR_RETURN(Tensor logits, model_.ForwardMtp(next, hidden, cache, /*all_logits=*/false));
  const int64_t settled = cache.length();
  for (int64_t i = 0; i < max_draft; ++i) {
    model_.backend().ReadF32(logits, logits_);
    // Greedy drafts: a point-mass proposal, for which runtime/speculative.h's
    // rule is exact, sampling or not.
    draft.push_back(Sampler::Argmax(logits_));
    if (i + 1 == max_draft) break;
    const int32_t token[1] = {draft.back()};
    auto more = model_.ForwardMtp(token, model_.last_hidden(), cache, /*all_logits=*/false);
    if (!more.ok()) break;  // e.g. the context is full: fewer drafts
    logits = *more;
  }
  cache.set_length(settled);  // the guesses' rows are not the trunk's
  return Status::Ok();
}

}  // namespace anymoe
