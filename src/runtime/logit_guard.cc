#include "runtime/logit_guard.h"

#include <cmath>
#include <string>

namespace anymoe {

Status CheckLogitsFinite(std::span<const float> logits) {
  // x * 0 is 0 for finite x and NaN otherwise; one branch-free pass the
  // compiler can vectorise, and the slow search only when something is off.
  float probe = 0.0f;
  for (float x : logits) probe += x * 0.0f;
  if (probe == 0.0f) return Status::Ok();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return Status::Error(std::string(kNumericalErrorPrefix) + "the model produced a " +
                           (std::isnan(logits[i]) ? "NaN" : "infinite") + " logit (token " +
                           std::to_string(i) + " of " + std::to_string(logits.size()) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace anymoe
