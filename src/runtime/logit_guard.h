// The runtime non-finite guard (reliability.md §4, F5): a NaN or infinite
// logit means the forward pass broke down (bad weights, an overflow in some
// kernel). Sampling from such logits would return garbage tokens, so the
// request fails with a "numerical error" instead and others go on.
#pragma once

#include <span>

#include "core/status.h"

namespace anymoe {

// Error text starts with this prefix, for people reading logs.
inline constexpr const char* kNumericalErrorPrefix = "numerical error: ";

// Ok when every logit is finite; otherwise an error (kInternal, code
// "numerical_error") naming the first bad token id and value. Does not
// allocate on success (runs once per token).
Status CheckLogitsFinite(std::span<const float> logits);

}  // namespace anymoe
