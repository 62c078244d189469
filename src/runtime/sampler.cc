#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/argmax.h"

namespace anymoe {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

uint64_t Sampler::StateBytes(int64_t vocab) {
  return uint64_t(vocab) * (sizeof(Candidate) + sizeof(float));
}

int32_t Sampler::Argmax(std::span<const float> logits) {
  // Vectorised (8 sequences x 49,152 logits per serving step); ties to the
  // lowest id, and all -inf (or NaN): the first id.
  const int64_t best = kernels::ArgmaxF32(logits.data(), logits.size());
  return best < 0 ? 0 : int32_t(best);
}

void Sampler::ApplyRepetitionPenalty(std::span<float> logits,
                                     std::span<const int32_t> history) const {
  const float p = params_.repetition_penalty;
  if (p == 1.0f) return;
  size_t begin = 0;
  if (params_.repeat_last_n >= 0 && history.size() > size_t(params_.repeat_last_n)) {
    begin = history.size() - size_t(params_.repeat_last_n);
  }
  // Each distinct token is penalised once, however often it occurred.
  for (size_t i = begin; i < history.size(); ++i) {
    const int32_t id = history[i];
    if (id < 0 || size_t(id) >= logits.size()) continue;
    bool seen_before = false;
    for (size_t j = begin; j < i && !seen_before; ++j) seen_before = history[j] == id;
    if (seen_before) continue;
    float& l = logits[size_t(id)];
    l = l > 0 ? l / p : l * p;
  }
}

void Sampler::Truncate(std::span<const float> logits) {
  // Candidates are ordered by their raw logits (dividing by a positive
  // temperature keeps the order), and the temperature only enters as
  // (logit - max) / T <= 0: for any T > 0, even a subnormal one whose
  // reciprocal overflows, the best token gets exp(0) = 1 and the others
  // exp(-x) in [0, 1], never inf - inf = NaN.
  const float temperature = params_.temperature;
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {logits[i], int32_t(i)};
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
    keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  probs_.resize(keep);
  const float max_logit = candidates_[0].logit;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((candidates_[i].logit - max_logit) / temperature);
    sum += probs_[i];
  }
  for (float& p : probs_) p = float(p / sum);

  if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p (at least one)
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += probs_[n++];
      if (cum >= params_.top_p) break;
    }
    keep = n;
  }
  if (params_.min_p > 0.0f) {  // drop tokens less likely than min_p x the best one
    const float floor = params_.min_p * probs_[0];
    size_t n = 1;
    while (n < keep && probs_[n] >= floor) ++n;
    keep = n;
  }
  candidates_.resize(keep);
  probs_.resize(keep);
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history) {
  ApplyRepetitionPenalty(logits, history);
  if (params_.temperature <= 0.0f) return Argmax(logits);
  Truncate(logits);
  double total = 0;
  for (float p : probs_) total += p;
  // Uniform draw from our own arithmetic: std distributions differ across libstdc++ versions.
  const double u = double(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
  double cum = 0;
  for (size_t i = 0; i < probs_.size(); ++i) {
    cum += probs_[i];
    if (u < cum) return candidates_[i].id;
  }
  return candidates_.back().id;
}

}  // namespace anymoe
