// Vocabulary tries and per-state token masks for constrained decoding
// (json_constraint.h). A mask walk is depth-first over the byte trie, carrying
// the automaton state of each prefix and pruning a subtree as soon as its
// prefix is refused.
#include "chat/json_constraint.h"

#include <algorithm>
#include <limits>


namespace anymoe {
namespace {

constexpr size_t kMaxCachedMasks = 4096;

void SetBit(std::vector<uint64_t>& bits, int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }

}  // namespace

Expected<std::shared_ptr<JsonConstraint>> JsonConstraint::Create(
    const nlohmann::ordered_json& schema, std::shared_ptr<const VocabularyIndex> vocab,
    std::vector<int32_t> end_tokens) {
  CompiledSchema compiled;
  if (schema.is_null()) {
    compiled = AnyJsonObjectSchema();
  } else {
    ASSIGN_OR_RETURN(compiled, CompileJsonSchema(schema));
  }
  for (const SchemaNode& n : compiled.nodes) {
    for (const std::string& s : n.literals.strings) {
      for (uint8_t b : s) {
        if (!vocab->has_single_byte(b)) {
          return Status::Error("json_schema: the key or value " + s + " holds byte " + std::to_string(b) +
                               ", which the vocabulary has no single-byte token for");
        }
      }
    }
  }
  return std::shared_ptr<JsonConstraint>(
      new JsonConstraint(std::move(compiled), std::move(vocab), std::move(end_tokens)));
}

JsonConstraint::JsonConstraint(CompiledSchema schema, std::shared_ptr<const VocabularyIndex> vocab,
                               std::vector<int32_t> end_tokens)
    : automaton_(std::move(schema)), vocab_(std::move(vocab)), end_tokens_(std::move(end_tokens)) {}

size_t JsonConstraint::cached_masks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::shared_ptr<const JsonConstraint::Mask> JsonConstraint::MaskFor(const JsonState& state,
                                                                    int64_t budget) const {
  if (state.size() > 1) {
    // Stacks evolve independently: a token is allowed when it is allowed from
    // some stack, so the mask is the union of the single-stack masks (each cached).
    auto mask = std::make_shared<Mask>();
    mask->bits.assign((size_t(vocab_->vocab_size()) + 63) / 64, 0);
    for (const JsonStack& st : state) {
      const std::shared_ptr<const Mask> one = MaskFor(JsonState{st}, budget);
      for (size_t w = 0; w < mask->bits.size(); ++w) mask->bits[w] |= one->bits[w];
      mask->max_completion = std::max(mask->max_completion, one->max_completion);
    }
    return mask;
  }
  const std::string key = automaton_.Key(state);
  std::shared_ptr<const Mask> full;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) full = it->second;
  }
  if (!full) {
    std::shared_ptr<Mask> computed = Compute(state);
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.size() >= kMaxCachedMasks) cache_.clear();
    cache_[key] = computed;
    full = computed;
  }
  if (full->max_completion <= budget) return full;
  return Restrict(*full, budget);
}

std::shared_ptr<JsonConstraint::Mask> JsonConstraint::Restrict(const Mask& full, int64_t budget) const {
  auto mask = std::make_shared<Mask>();
  mask->bits.assign(full.bits.size(), 0);
  if (full.now == 0) {
    for (int32_t id : end_tokens_) {
      if (id >= 0 && id < vocab_->vocab_size()) SetBit(mask->bits, id);
    }
  }
  AddPlainTokens(full.plain, budget, mask.get());
  for (const auto& [id, completion] : full.walked) {
    if (completion <= budget) {
      SetBit(mask->bits, id);
      mask->max_completion = std::max<int64_t>(mask->max_completion, completion);
    }
  }
  return mask;
}

// A plain token keeps a stack alive when its characters fit the stack's
// maxLength; each character minLength still needs shortens the completion.
void JsonConstraint::AddPlainTokens(const std::vector<JsonAutomaton::PlainString>& stacks, int64_t budget,
                                    Mask* mask) const {
  if (stacks.empty()) return;
  int64_t widest = 0;
  for (const auto& s : stacks) widest = s.room < 0 || widest < 0 ? -1 : std::max(widest, s.room);
  for (const auto& [id, chars] : vocab_->plain_string_tokens()) {
    if (widest >= 0 && chars > widest) continue;
    int64_t best = INT64_MAX;
    for (const auto& s : stacks) {
      if (s.room >= 0 && chars > s.room) continue;
      best = std::min(best, s.completion - std::min<int64_t>(chars, s.need));
    }
    if (best > budget) continue;
    SetBit(mask->bits, id);
    mask->max_completion = std::max(mask->max_completion, best);
  }
}

std::shared_ptr<JsonConstraint::Mask> JsonConstraint::Compute(const JsonState& state) const {
  auto mask = std::make_shared<Mask>();
  mask->bits.assign((size_t(vocab_->vocab_size()) + 63) / 64, 0);
  const int64_t now = automaton_.ShortestCompletion(state);
  mask->now = now;
  if (now == 0) {
    for (int32_t id : end_tokens_) {
      if (id >= 0 && id < vocab_->vocab_size()) SetBit(mask->bits, id);
    }
  }
  const bool plain_string = automaton_.InPlainString(state, &mask->plain);
  AddPlainTokens(mask->plain, std::numeric_limits<int64_t>::max(), mask.get());
  const std::vector<VocabularyIndex::TrieNode>& trie = plain_string ? vocab_->string_trie() : vocab_->trie();
  struct Item {
    int32_t node;
    JsonState state;
  };
  std::vector<Item> stack;
  stack.push_back({0, state});
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    for (const auto& [byte, child] : trie[size_t(item.node)].edges) {
      JsonState next = automaton_.Advance(item.state, byte);
      if (next.empty()) continue;
      const auto& tokens = trie[size_t(child)].tokens;
      if (!tokens.empty()) {
        const int64_t completion = automaton_.ShortestCompletion(next);
        for (int32_t id : tokens) {
          SetBit(mask->bits, id);
          mask->walked.emplace_back(id, int32_t(std::min<int64_t>(completion, INT32_MAX)));
        }
        mask->max_completion = std::max(mask->max_completion, completion);
      }
      if (!trie[size_t(child)].edges.empty()) stack.push_back({child, std::move(next)});
    }
  }
  return mask;
}

std::unique_ptr<ConstraintState> JsonConstraint::NewState() const {
  return std::make_unique<JsonConstraintState>(
      std::static_pointer_cast<const JsonConstraint>(shared_from_this()));
}

JsonConstraintState::JsonConstraintState(std::shared_ptr<const JsonConstraint> constraint)
    : constraint_(std::move(constraint)), state_(constraint_->automaton().Start()) {}

std::shared_ptr<const JsonConstraint::Mask> JsonConstraintState::Allowed(int64_t remaining) {
  // After this step's token, `remaining - 1` tokens are left to close the document.
  return constraint_->MaskFor(state_, std::max<int64_t>(0, remaining - 1));
}

Status JsonConstraintState::ApplyMask(std::span<float> logits, int64_t remaining) {
  const std::shared_ptr<const JsonConstraint::Mask> mask = Allowed(remaining);
  if (!MaskLogits(mask->bits, logits)) {
    const int64_t needed = ShortestCompletion();
    if (needed > std::max<int64_t>(0, remaining - 1)) {
      return Status::Error("the JSON document needs at least " + std::to_string(needed) +
                               " more bytes but only " + std::to_string(remaining) +
                               " tokens remain (max_tokens or the context)",
                           ErrorKind::kInvalidArgument, "json_schema_no_room", "max_tokens");
    }
    return Status::Error("no token of the vocabulary continues the JSON document",
                         ErrorKind::kInvalidArgument, "json_schema_no_token");
  }
  return Status::Ok();
}

Status JsonConstraintState::Accept(int32_t token) {
  const auto& ends = constraint_->end_tokens();
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) {
    if (!CanEnd()) return Status::Error("end token before the JSON document is complete");
    ended_ = true;
    return Status::Ok();
  }
  if (ended_) return Status::Error("token after the end of the JSON document");
  const VocabularyIndex& v = constraint_->vocab();
  if (token < 0 || token >= v.vocab_size()) return Status::Error("token id out of range");
  JsonState next = state_;
  const std::string_view piece = v.piece(token);
  if (piece.empty()) return Status::Error("token " + std::to_string(token) + " has no text");
  for (uint8_t b : piece) {
    next = constraint_->automaton().Advance(next, b);
    if (next.empty()) return Status::Error("token " + std::to_string(token) + " breaks the JSON constraint");
  }
  state_ = std::move(next);
  return Status::Ok();
}

bool JsonConstraintState::IsComplete() const {
  if (ended_) return true;
  for (const JsonStack& st : state_) {
    if (!st.done) return false;
  }
  return !state_.empty();
}

bool JsonConstraintState::CanEnd() const {
  return constraint_->automaton().ShortestCompletion(state_) == 0;
}

}  // namespace anymoe
