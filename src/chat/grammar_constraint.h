// Constrained decoding by a GBNF grammar (llama-server's `grammar`, `anymoe
// run --grammar`): per step, the tokens whose bytes keep the output a prefix
// of a string of the grammar that can still be finished within the token
// budget, so the final output is a sentence of the grammar. Masks come from
// walking the vocabulary's byte trie against the pushdown state
// (grammar_pushdown.h) and are cached per state, shared by every sequence of
// the constraint; the cache is bounded in entries and bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chat/grammar_pushdown.h"
#include "chat/output_constraint.h"
#include "chat/vocabulary_index.h"

namespace anymoe {

class GrammarConstraint : public OutputConstraint {
 public:
  // Parses `gbnf` (errors: gbnf_grammar.h's codes, grammar_state_limit).
  // `end_tokens`: ids that end generation, allowed once the output is a
  // complete sentence.
  static Expected<std::shared_ptr<GrammarConstraint>> Create(
      std::string_view gbnf, std::shared_ptr<const VocabularyIndex> vocab,
      std::vector<int32_t> end_tokens);

  const GrammarPushdown& machine() const { return machine_; }
  const GrammarState& start() const { return start_; }
  const VocabularyIndex& vocab() const { return *vocab_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

  struct Mask {
    std::vector<uint64_t> bits;  // one bit per token id
    int64_t max_completion = 0;  // largest ShortestCompletion after an allowed token
    std::vector<std::pair<int32_t, int32_t>> walked;  // allowed text tokens, completion after each
    bool accepting = false;                           // end tokens allowed
    // The walk passed kMaxMaskWork stack entries and stopped (a hostile
    // grammar): the mask is incomplete and ApplyMask fails by name.
    bool over_budget = false;
  };
  // Stack entries a mask walk may copy: a bound on a step's time whatever
  // the grammar (the corpus grammars need at most 3.1M on SmolLM2's 49k
  // vocabulary: GbnfGrammar.AgreesWithLarkTokenByTokenThroughTheMasks).
  static constexpr int64_t kMaxMaskWork = int64_t(8) << 20;
  // The tokens allowed in `state` after which the output can still be
  // finished in `budget` tokens.
  std::shared_ptr<const Mask> MaskFor(const GrammarState& state, int64_t budget) const;

  size_t cached_masks() const;
  std::unique_ptr<ConstraintState> NewState() const override;

 private:
  GrammarConstraint(GrammarPushdown machine, GrammarState start,
                    std::shared_ptr<const VocabularyIndex> vocab, std::vector<int32_t> end_tokens);
  std::shared_ptr<Mask> Compute(const GrammarState& state) const;

  GrammarPushdown machine_;
  GrammarState start_;
  std::shared_ptr<const VocabularyIndex> vocab_;
  std::vector<int32_t> end_tokens_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Mask>> cache_;
  mutable size_t cache_bytes_ = 0;
};

// One sequence's progress through a grammar.
class GrammarConstraintState : public ConstraintState {
 public:
  explicit GrammarConstraintState(std::shared_ptr<const GrammarConstraint> constraint);

  // ConstraintState::ApplyMask. No token allowed: the shortest way to finish
  // is longer than the tokens left (code grammar_no_room), or no token of the
  // vocabulary continues the output (grammar_no_token).
  Status ApplyMask(std::span<float> logits, int64_t remaining) override;
  std::shared_ptr<const GrammarConstraint::Mask> Allowed(int64_t remaining) const;
  // Fails on a token the grammar refuses (grammar_rejected_token) or the
  // machine's limits (grammar_state_limit).
  Status Accept(int32_t token) override;
  bool IsComplete() const override;
  bool CanEnd() const override;
  // Bytes still needed to finish a sentence.
  int64_t ShortestCompletion() const { return constraint_->machine().ShortestCompletion(state_); }
  // Feeds raw bytes (tests: strings that are not token sequences).
  Status AcceptBytes(std::string_view bytes);

 private:
  std::shared_ptr<const GrammarConstraint> constraint_;
  GrammarState state_;
  bool ended_ = false;
};

}  // namespace anymoe
