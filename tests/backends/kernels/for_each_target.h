// Runs a test body once per CPU kernel target that is compiled in and
// supported by this CPU (kernels/cpu_target.h), so every SIMD path is checked,
// not just the best one. Each kernel source then dispatches as on a CPU whose
// best target is that one (the best target it was compiled for at or below it).
#pragma once

#include <gtest/gtest.h>

#include "backends/cpu/kernels/cpu_target.h"

namespace anymoe::testing {

template <typename Body>
void ForEachTarget(Body&& body) {
  const std::vector<kernels::CpuTarget> targets = kernels::AvailableCpuTargets();
  ASSERT_FALSE(targets.empty());
  for (const kernels::CpuTarget& target : targets) {
    ASSERT_TRUE(kernels::SelectCpuTarget(target.name).ok());
    SCOPED_TRACE(target.name);
    body();
  }
  ASSERT_TRUE(kernels::SelectCpuTarget("best").ok());
}

}  // namespace anymoe::testing
