// Token masks of a GBNF grammar (grammar_constraint.h): a depth-first walk of
// the vocabulary trie carrying the pushdown state of each prefix, pruned as
// soon as the grammar refuses a prefix.
#include "chat/grammar_constraint.h"

#include <algorithm>
#include <limits>

namespace anymoe {
namespace {

constexpr size_t kMaxCachedMasks = 1024;
constexpr size_t kMaxCacheBytes = size_t(256) << 20;

void SetBit(std::vector<uint64_t>& bits, int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }

size_t MaskBytes(const GrammarConstraint::Mask& m) {
  return m.bits.size() * sizeof(uint64_t) + m.walked.size() * sizeof(m.walked[0]) + 64;
}

}  // namespace

Expected<std::shared_ptr<GrammarConstraint>> GrammarConstraint::Create(
    std::string_view gbnf, std::shared_ptr<const VocabularyIndex> vocab, std::vector<int32_t> end_tokens) {
  ASSIGN_OR_RETURN(GbnfGrammar grammar, ParseGbnf(gbnf));
  GrammarPushdown machine(std::move(grammar));
  ASSIGN_OR_RETURN(GrammarState start, machine.Start());
  return std::shared_ptr<GrammarConstraint>(
      new GrammarConstraint(std::move(machine), std::move(start), std::move(vocab), std::move(end_tokens)));
}

GrammarConstraint::GrammarConstraint(GrammarPushdown machine, GrammarState start,
                                     std::shared_ptr<const VocabularyIndex> vocab,
                                     std::vector<int32_t> end_tokens)
    : machine_(std::move(machine)),
      start_(std::move(start)),
      vocab_(std::move(vocab)),
      end_tokens_(std::move(end_tokens)) {}

std::unique_ptr<ConstraintState> GrammarConstraint::NewState() const {
  return std::make_unique<GrammarConstraintState>(
      std::static_pointer_cast<const GrammarConstraint>(shared_from_this()));
}

size_t GrammarConstraint::cached_masks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::shared_ptr<const GrammarConstraint::Mask> GrammarConstraint::MaskFor(const GrammarState& state,
                                                                          int64_t budget) const {
  const std::string key = machine_.Key(state);
  std::shared_ptr<const Mask> full;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) full = it->second;
  }
  if (!full) {
    std::shared_ptr<Mask> computed = Compute(state);
    if (computed->over_budget) return computed;
    std::lock_guard<std::mutex> lock(mu_);
    const size_t bytes = MaskBytes(*computed);
    if (cache_.size() >= kMaxCachedMasks || cache_bytes_ + bytes > kMaxCacheBytes) {
      cache_.clear();
      cache_bytes_ = 0;
    }
    if (cache_.emplace(key, computed).second) cache_bytes_ += bytes;
    full = computed;
  }
  if (full->max_completion <= budget) return full;
  // Near the end of the budget: only the tokens after which the rest fits.
  auto mask = std::make_shared<Mask>();
  mask->bits.assign(full->bits.size(), 0);
  mask->accepting = full->accepting;
  if (full->accepting) {
    for (int32_t id : end_tokens_) {
      if (id >= 0 && id < vocab_->vocab_size()) SetBit(mask->bits, id);
    }
  }
  for (const auto& [id, completion] : full->walked) {
    if (completion <= budget) {
      SetBit(mask->bits, id);
      mask->max_completion = std::max<int64_t>(mask->max_completion, completion);
    }
  }
  return mask;
}

std::shared_ptr<GrammarConstraint::Mask> GrammarConstraint::Compute(const GrammarState& state) const {
  auto mask = std::make_shared<Mask>();
  mask->bits.assign((size_t(vocab_->vocab_size()) + 63) / 64, 0);
  mask->accepting = machine_.Accepting(state);
  if (mask->accepting) {
    for (int32_t id : end_tokens_) {
      if (id >= 0 && id < vocab_->vocab_size()) SetBit(mask->bits, id);
    }
  }
  const std::vector<VocabularyIndex::TrieNode>& trie = vocab_->trie();
  if (trie.empty()) return mask;
  struct Item {
    int32_t node;
    GrammarState state;
  };
  std::vector<Item> stack;
  stack.push_back({0, state});
  int64_t work = 0;
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    for (const auto& [byte, child] : trie[size_t(item.node)].edges) {
      Expected<GrammarState> next = machine_.Advance(item.state, byte);
      // A prefix past the machine's limits is refused like one the grammar
      // refuses: the output stays a sentence, and Accept reports the limit
      // only if a sampled token reaches it.
      if (!next.ok() || next->dead()) continue;
      for (const GrammarStack& s : next->stacks) work += int64_t(s.size()) + 1;
      if (work > kMaxMaskWork) {
        mask->over_budget = true;
        return mask;
      }
      const auto& tokens = trie[size_t(child)].tokens;
      if (!tokens.empty()) {
        const int64_t completion = machine_.ShortestCompletion(*next);
        for (int32_t id : tokens) {
          SetBit(mask->bits, id);
          mask->walked.emplace_back(id, int32_t(std::min<int64_t>(completion, INT32_MAX)));
        }
        mask->max_completion = std::max(mask->max_completion, completion);
      }
      if (!trie[size_t(child)].edges.empty()) stack.push_back({child, std::move(*next)});
    }
  }
  return mask;
}

GrammarConstraintState::GrammarConstraintState(std::shared_ptr<const GrammarConstraint> constraint)
    : constraint_(std::move(constraint)), state_(constraint_->start()) {}

std::shared_ptr<const GrammarConstraint::Mask> GrammarConstraintState::Allowed(int64_t remaining) const {
  // After this step's token, `remaining - 1` tokens are left to finish.
  return constraint_->MaskFor(state_, std::max<int64_t>(0, remaining - 1));
}

Status GrammarConstraintState::ApplyMask(std::span<float> logits, int64_t remaining) {
  const std::shared_ptr<const GrammarConstraint::Mask> mask = Allowed(remaining);
  if (mask->over_budget) {
    return Status::Error("the grammar's token mask needs more than " +
                             std::to_string(GrammarConstraint::kMaxMaskWork) +
                             " stack steps; the grammar is too ambiguous or too deeply nested",
                         ErrorKind::kInvalidArgument, "grammar_state_limit", "grammar");
  }
  if (MaskLogits(mask->bits, logits)) return Status::Ok();
  const int64_t needed = ShortestCompletion();
  if (needed > std::max<int64_t>(0, remaining - 1)) {
    return Status::Error("the grammar needs at least " + std::to_string(needed) +
                             " more bytes to finish but only " + std::to_string(remaining) +
                             " tokens remain (n_predict / max_tokens or the context)",
                         ErrorKind::kInvalidArgument, "grammar_no_room", "max_tokens");
  }
  return Status::Error("no token of the vocabulary continues the grammar here",
                       ErrorKind::kInvalidArgument, "grammar_no_token", "grammar");
}

Status GrammarConstraintState::Accept(int32_t token) {
  const auto& ends = constraint_->end_tokens();
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) {
    if (!CanEnd()) return Status::Error("end token before the grammar's sentence is complete");
    ended_ = true;
    return Status::Ok();
  }
  const VocabularyIndex& v = constraint_->vocab();
  if (token < 0 || token >= v.vocab_size()) return Status::Error("token id out of range");
  const std::string_view piece = v.piece(token);
  if (piece.empty()) return Status::Error("token " + std::to_string(token) + " has no text");
  return AcceptBytes(piece);
}

Status GrammarConstraintState::AcceptBytes(std::string_view bytes) {
  if (ended_) return Status::Error("text after the end of the grammar's sentence");
  GrammarState next = state_;
  for (uint8_t b : bytes) {
    ASSIGN_OR_RETURN(next, constraint_->machine().Advance(next, b));
    if (next.dead()) {
      return Status::Error("the grammar refuses this text", ErrorKind::kInvalidArgument,
                           "grammar_rejected_token", "grammar");
    }
  }
  state_ = std::move(next);
  return Status::Ok();
}

bool GrammarConstraintState::IsComplete() const {
  return ended_ || constraint_->machine().Complete(state_);
}

bool GrammarConstraintState::CanEnd() const { return constraint_->machine().Accepting(state_); }

}  // namespace anymoe
