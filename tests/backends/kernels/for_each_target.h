// Runs a test body once per Highway target that is both compiled in and
// supported by this CPU, so every SIMD path is checked, not just the best one.
#pragma once

#include <gtest/gtest.h>

#include "hwy/targets.h"

namespace anymoe::testing {

template <typename Body>
void ForEachTarget(Body&& body) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the real CPU
}

}  // namespace anymoe::testing
