// Constrained decoding for structured output: a compiled JSON schema (or
// json_object) applied to a tokenizer's vocabulary. Per step it gives the
// tokens whose bytes keep the output a prefix of a valid document that can
// still be closed within the remaining token budget, so the final output
// always parses and validates. Masks are computed by walking a byte trie of
// the vocabulary against the automaton state and cached per state (shared by
// every sequence using the same constraint); inside a plain string the
// tokens without quotes, backslashes or control bytes are added at once.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/json_automaton.h"
#include "chat/output_constraint.h"
#include "chat/vocabulary_index.h"
#include "core/status.h"

namespace anymoe {

// A compiled constraint, shared by the sequences of one request (or many).
class JsonConstraint : public OutputConstraint {
 public:
  // `schema`: a JSON schema, or null for json_object. `end_tokens`: ids that
  // end generation (EOS / end of turn), allowed once the document is complete.
  static Expected<std::shared_ptr<JsonConstraint>> Create(
      const nlohmann::ordered_json& schema, std::shared_ptr<const VocabularyIndex> vocab,
      std::vector<int32_t> end_tokens);

  const JsonAutomaton& automaton() const { return automaton_; }
  const VocabularyIndex& vocab() const { return *vocab_; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

  struct Mask {
    std::vector<uint64_t> bits;   // one bit per token id
    int64_t max_completion = 0;   // largest ShortestCompletion after an allowed token
    // What a tighter budget needs to filter the mask without walking again:
    // the walked tokens with their completions, and the plain-string rule.
    std::vector<std::pair<int32_t, int32_t>> walked;
    std::vector<JsonAutomaton::PlainString> plain;  // empty: not inside a string's text
    int64_t now = 0;
  };
  // The tokens allowed in `state` after which the document can still be
  // closed in `budget` tokens: the cached mask of the state, or (near the end
  // of the budget) that mask filtered by each token's completion length.
  std::shared_ptr<const Mask> MaskFor(const JsonState& state, int64_t budget) const;

  size_t cached_masks() const;
  std::unique_ptr<ConstraintState> NewState() const override;

 private:
  JsonConstraint(CompiledSchema schema, std::shared_ptr<const VocabularyIndex> vocab,
                 std::vector<int32_t> end_tokens);
  std::shared_ptr<Mask> Compute(const JsonState& state) const;
  std::shared_ptr<Mask> Restrict(const Mask& full, int64_t budget) const;
  // Adds the plain string tokens whose completion fits `budget`.
  void AddPlainTokens(const std::vector<JsonAutomaton::PlainString>& stacks, int64_t budget, Mask* mask) const;

  JsonAutomaton automaton_;
  std::shared_ptr<const VocabularyIndex> vocab_;
  std::vector<int32_t> end_tokens_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Mask>> cache_;
};

// One sequence's progress through a constraint: the decode loop asks for the
// mask, samples, then accepts the token.
class JsonConstraintState : public ConstraintState {
 public:
  explicit JsonConstraintState(std::shared_ptr<const JsonConstraint> constraint);

  // ConstraintState::ApplyMask. No token allowed: the document cannot be
  // closed in the tokens left (code json_schema_no_room), or the vocabulary
  // has no token that continues it (json_schema_no_token).
  Status ApplyMask(std::span<float> logits, int64_t remaining) override;
  // The allowed tokens as a bitset (for tests and other samplers).
  std::shared_ptr<const JsonConstraint::Mask> Allowed(int64_t remaining);
  // Advances by a sampled token; an end token is accepted only when complete.
  Status Accept(int32_t token) override;
  // The document is complete and no byte may follow (e.g. a closed object).
  bool IsComplete() const override;
  // An end token may come now (complete, or a top-level number that could go on).
  bool CanEnd() const override;
  // Bytes still needed to close the document (ShortestCompletion).
  int64_t ShortestCompletion() const { return constraint_->automaton().ShortestCompletion(state_); }

 private:
  std::shared_ptr<const JsonConstraint> constraint_;
  JsonState state_;
  bool ended_ = false;
};

}  // namespace anymoe
