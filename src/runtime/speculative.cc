#include "runtime/speculative.h"

#include <algorithm>

namespace anymoe {

std::string_view SpecKindName(SpecKind kind) {
  switch (kind) {
    case SpecKind::kNone: return "none";
    case SpecKind::kNgram: return "ngram";
    case SpecKind::kMtp: return "mtp";
    case SpecKind::kCallback: return "callback";
  }
  return "?";
}

Expected<SpecKind> ParseSpecKind(std::string_view name) {
  for (SpecKind k : {SpecKind::kNone, SpecKind::kNgram, SpecKind::kMtp}) {
    if (name == SpecKindName(k)) return k;
  }
  return Status::Error("--spec " + std::string(name) + ": use none, ngram or mtp");
}

int64_t DraftGovernor::Allowed(int64_t wanted, double row_share) {
  row_share_ = std::clamp(row_share, 0.0, 1.0);
  if (pause_left_ > 0) {
    --pause_left_;
    return 0;
  }
  if (wanted <= 0 || row_share_ <= 0 || rate_ >= 1) return std::max<int64_t>(wanted, 0);
  // The largest k with rate^k >= row_share, at least 1.
  int64_t k = 1;
  double p = rate_;
  while (k < wanted && p * rate_ >= row_share_) {
    p *= rate_;
    ++k;
  }
  return k;
}

void DraftGovernor::Record(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  const double step_rate = double(accepted) / double(drafted);
  rate_ += (step_rate - rate_) / 8;
  const double limit = threshold();
  if (limit <= 0) return;
  if (rate_ >= limit) {
    if (step_rate >= limit) next_pause_ = 8;  // it pays again
    return;
  }
  pause_left_ = next_pause_;
  next_pause_ = std::min<int64_t>(2 * next_pause_, 256);
  // A fresh chance after the pause: two steps of misses pause again.
  rate_ = std::min(1.0, 1.2 * limit);
}

DraftVerdict VerifyDraftRow(Sampler& sampler, std::span<float> logits,
                            std::span<const int32_t> history, int32_t draft) {
  DraftVerdict v;
  v.token = sampler.Sample(logits, history);
  v.accepted = draft >= 0 && v.token == draft;
  return v;
}

}  // namespace anymoe
