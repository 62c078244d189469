// What the decode loop asks of a constraint on the output (a JSON schema,
// a GBNF grammar): per step a mask over the vocabulary, then the sampled
// token; generation ends when the output is complete. runtime/token_decoder
// drives it without knowing which constraint it is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"

namespace anymoe {

// One sequence's progress through a constraint.
class ConstraintState {
 public:
  virtual ~ConstraintState() = default;
  // Sets the logits of disallowed tokens to -inf. `remaining`: tokens the
  // budget still allows, this step included (>= 1). Fails with a named code,
  // leaving nothing to sample, when no token is allowed.
  virtual Status ApplyMask(std::span<float> logits, int64_t remaining) = 0;
  // Advances by a sampled token; an end token is accepted only when CanEnd().
  virtual Status Accept(int32_t token) = 0;
  // The output is complete and nothing may follow.
  virtual bool IsComplete() const = 0;
  // An end token may come now.
  virtual bool CanEnd() const = 0;
};

// A compiled constraint, shared by the sequences of one request (or many).
class OutputConstraint : public std::enable_shared_from_this<OutputConstraint> {
 public:
  virtual ~OutputConstraint() = default;
  // A fresh state at the start of the output; the constraint must be owned
  // by a shared_ptr (the state keeps it alive).
  virtual std::unique_ptr<ConstraintState> NewState() const = 0;
};

// Sets logits[i] = -inf for every i whose bit is clear in `bits` (one bit per
// token id; ids past the bitset are disallowed). Returns false, touching
// nothing, when no id below logits.size() is allowed.
bool MaskLogits(std::span<const uint64_t> bits, std::span<float> logits);

}  // namespace anymoe
