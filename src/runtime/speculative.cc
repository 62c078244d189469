#include "runtime/speculative.h"

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

DraftVerdict VerifyDraftRow(Sampler& sampler, std::span<float> logits,
                            std::span<const int32_t> history, int32_t draft) {
  DraftVerdict v;
  v.token = sampler.Sample(logits, history);
  v.accepted = draft >= 0 && v.token == draft;
  return v;
}

}  // namespace anymoe
