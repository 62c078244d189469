#include "runtime/logit_guard.h"

#include <cmath>
#include <string>

namespace anymoe {

Status CheckLogitsFinite(std::span<const float> logits) {
  // x * 0 is 0 for finite x and NaN otherwise; one branch-free pass, in
  // independent lanes so that the compiler vectorises it (a single float sum
  // is a serial chain it may not reorder), and the slow search only when
  // something is off.
  constexpr size_t kLanes = 16;
  float probe[kLanes] = {};
  const size_t whole = logits.size() / kLanes * kLanes;
  for (size_t i = 0; i < whole; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) probe[l] += logits[i + l] * 0.0f;
  }
  float total = 0.0f;
  for (size_t l = 0; l < kLanes; ++l) total += probe[l];
  for (size_t i = whole; i < logits.size(); ++i) total += logits[i] * 0.0f;
  if (total == 0.0f) return Status::Ok();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return Status::Error(std::string(kNumericalErrorPrefix) + "the model produced a " +
                               (std::isnan(logits[i]) ? "NaN" : "infinite") + " logit (token " +
                               std::to_string(i) + " of " + std::to_string(logits.size()) + ")",
                           ErrorKind::kInternal, "numerical_error");
    }
  }
  return Status::Ok();
}

}  // namespace anymoe
