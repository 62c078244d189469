// Speculative decoding: a cheap drafter proposes the next few tokens, and the
// model checks them all in one forward step of the sequence (the sampled token
// and the drafts as rows of one step, logits of every row). The accepted
// prefix and one token of the model's own are kept; the KV cache rows of the
// rejected drafts are dropped by truncating the sequence (its blocks stay with
// it and are overwritten by the next step, so the pool's bookkeeping is
// untouched). See docs/speculative.md.
//
// Acceptance. Standard speculative sampling (Leviathan et al. 2023, Chen et
// al. 2023) accepts a draft d drawn from the drafter's distribution q with
// probability min(1, p(d) / q(d)), where p is the model's distribution at that
// position (after the sampler's penalty, temperature and top-k/p/min-p), and
// on rejection draws from the residual max(0, p - q), renormalised; the output
// is then distributed exactly as p. Our drafters (n-gram lookup, the MTP
// layer's argmax) are deterministic: q is a point mass on d, so
//   accept d with probability min(1, p(d) / 1) = p(d);
//   on rejection draw from max(0, p - q) / (1 - p(d)) = p(x) / (1 - p(d)) for x != d.
// Drawing one x from p and accepting iff x == d has the same law: P(accept) =
// p(d), and given rejection x is distributed as p(x) / (1 - p(d)) over x != d.
// That is what VerifyDraftRow does. It costs one draw per emitted token, as
// plain decoding does, so with bitwise-equal logits a seeded run emits the
// same tokens with speculation on or off. Greedy (temperature 0) is the limit
// p = one-hot(argmax): accept iff d is the argmax.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/ngram_drafter.h"
#include "runtime/sampler.h"

namespace anymoe {

// kCallback: SpeculativeOptions::drafter proposes (tests, embedders).
enum class SpecKind { kNone, kNgram, kMtp, kCallback };
std::string_view SpecKindName(SpecKind kind);
// "none", "ngram" or "mtp"; anything else is an error naming --spec.
Expected<SpecKind> ParseSpecKind(std::string_view name);

struct SpeculativeOptions {
  SpecKind kind = SpecKind::kNone;
  int64_t max_draft = 4;  // drafted tokens per step (--draft)
  // DraftGovernor: drafting pauses while the acceptance rate (a running
  // average over recent verify steps) is below this; 0: never.
  float min_acceptance = 0.0f;
  NgramDraftOptions ngram;
  // kCallback: fills `draft` with up to `max_draft` tokens to follow `context`
  // (the sequence so far, the token about to be fed last).
  std::function<void(std::span<const int32_t> context, int64_t max_draft,
                     std::vector<int32_t>& draft)>
      drafter;
  // Called with each step's drafts (any kind) and the context they follow.
  std::function<void(std::span<const int32_t> context, std::span<const int32_t> draft)>
      on_draft;
};

// Stops drafting when it does not pay. A rejected draft costs a row of the
// step (more on MoE models, whose drafted rows route to other experts) and
// gains nothing. The governor keeps the acceptance rate, averaged over recent
// verify steps (exponentially, weight 1/8 per step), and a threshold: the
// larger of min_acceptance and the row share the caller says a row costs
// (StepCostModel::RowShare: 0 for a lone sequence, whose rows are nearly
// free; near 1 on a compute-bound batch). While the rate is below the
// threshold the sequence decodes plainly for a pause of 8 steps, doubled (up
// to 256) each time drafting resumes and fails again, reset when it pays
// again. Otherwise it drafts as many tokens as pay: the j-th draft is
// accepted with probability about rate^j, and is worth its row while that is
// at least the row share (at least one draft after a pause, to measure).
class DraftGovernor {
 public:
  explicit DraftGovernor(float min_acceptance) : min_acceptance_(min_acceptance) {}
  // How many of `wanted` drafts to make this step (0 while paused), when a
  // row costs `row_share` of the step's average row.
  int64_t Allowed(int64_t wanted, double row_share = 0);
  // After a verify step with `drafted` drafts of which `accepted` were.
  void Record(int64_t drafted, int64_t accepted);
  double acceptance() const { return rate_; }
  bool paused() const { return pause_left_ > 0; }

 private:
  double threshold() const { return std::max<double>(min_acceptance_, row_share_); }

  float min_acceptance_;
  double row_share_ = 0;  // as of the last Allowed call
  double rate_ = 1.0;     // optimistic until measured
  int64_t pause_left_ = 0;
  int64_t next_pause_ = 8;
};

struct DraftVerdict {
  int32_t token = -1;     // the token emitted at this position
  bool accepted = false;  // token == the draft
};

// One position of a verify step: samples the model's token from `logits`
// (modified in place, as Sampler::Sample does) and accepts `draft` iff they
// are equal (draft < 0: none to check). Exact for deterministic drafts (above).
DraftVerdict VerifyDraftRow(Sampler& sampler, std::span<float> logits,
                            std::span<const int32_t> history, int32_t draft);

}  // namespace anymoe
