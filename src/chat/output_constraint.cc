// Applying a token bitset to a row of logits (output_constraint.h).
#include "chat/output_constraint.h"

#include <algorithm>
#include <limits>

namespace anymoe {

bool MaskLogits(std::span<const uint64_t> bits, std::span<float> logits) {
  const size_t known = std::min(logits.size(), bits.size() * 64);
  // Without this check an empty mask would leave every logit at -inf and the
  // sampler would pick some token the constraint then rejects.
  bool any = false;
  for (size_t w = 0; w * 64 < known && !any; ++w) {
    const size_t bits_here = std::min<size_t>(64, known - w * 64);
    const uint64_t valid = bits_here == 64 ? ~uint64_t(0) : (uint64_t(1) << bits_here) - 1;
    any = (bits[w] & valid) != 0;
  }
  if (!any) return false;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w * 64 < known; ++w) {
    const uint64_t word = bits[w];
    if (word == ~uint64_t(0)) continue;
    const size_t end = std::min(known, w * 64 + 64);
    if (word == 0) {
      std::fill(logits.begin() + long(w * 64), logits.begin() + long(end), kNegInf);
      continue;
    }
    for (size_t i = w * 64; i < end; ++i) {
      if (!(word >> (i & 63) & 1)) logits[i] = kNegInf;
    }
  }
  for (size_t i = known; i < logits.size(); ++i) logits[i] = kNegInf;
  return true;
}

}  // namespace anymoe
