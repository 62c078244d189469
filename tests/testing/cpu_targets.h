// Test parameters over the CPU kernels' SIMD targets: every target compiled in
// that this machine can run, best first (kernels/cpu_target.h). The model-level
// tests that promise the same numbers everywhere (batch invariance, goldens)
// take one as a parameter, so a machine whose best target differs from the
// developer's is not the first to run that target's code.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"

namespace anymoe::testing {

inline std::vector<std::string> CpuTargetNames() {
  std::vector<std::string> names;
  for (const kernels::CpuTarget& t : kernels::AvailableCpuTargets()) names.push_back(t.name);
  return names;
}

// The kernels dispatch to `name` while this lives, then to the machine's best.
class ScopedCpuTarget {
 public:
  explicit ScopedCpuTarget(const std::string& name) {
    const Status st = kernels::SelectCpuTarget(name);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  ~ScopedCpuTarget() { (void)kernels::SelectCpuTarget("best"); }
  ScopedCpuTarget(const ScopedCpuTarget&) = delete;
  ScopedCpuTarget& operator=(const ScopedCpuTarget&) = delete;
};

// A parameter's name fit for a test name ("avx512-vnni" -> "avx512_vnni").
inline std::string TestNameOf(std::string s) {
  for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

}  // namespace anymoe::testing
