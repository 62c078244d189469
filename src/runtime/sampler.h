// Turns logits into the next token: repetition penalty, temperature, top-k,
// top-p, min-p (transformers' order), then a draw from a seeded generator, or
// argmax when the temperature is 0. Same seed and inputs give the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace anymoe {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repetition_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;           // how much history the penalty sees; < 0: all
  uint64_t seed = 0;

  static SamplingParams Greedy() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `logits` [vocab] is modified in place. `history` is the sequence so far
  // (prompt + generated), for the repetition penalty.
  int32_t Sample(std::span<float> logits, std::span<const int32_t> history);

  // Highest logit, ties to the lowest id (deterministic).
  static int32_t Argmax(std::span<const float> logits);

  // The most a sampler keeps between calls for a vocabulary of `vocab`
  // tokens (every candidate and its probability).
  static uint64_t StateBytes(int64_t vocab);

 private:
  void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> history) const;
  // Narrows candidates_ (sorted by descending logit) and leaves softmax probabilities in probs_.
  void Truncate(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  struct Candidate {
    float logit;
    int32_t id;
  };
  std::vector<Candidate> candidates_;  // reused across calls: no per-token allocation
  std::vector<float> probs_;
};

}  // namespace anymoe
