// The kernels' target switch: every available target can be selected and is
// then the active one, "best" returns to the first, an unknown name is a
// one-line error that lists the choices and changes nothing.
#include "backends/cpu/kernels/cpu_target.h"

#include <gtest/gtest.h>

#include <set>

namespace anymoe::kernels {
namespace {

TEST(CpuTarget, EveryAvailableTargetCanBeSelectedAndIsThenActive) {
  const std::vector<CpuTarget> targets = AvailableCpuTargets();
  ASSERT_FALSE(targets.empty());
  std::set<std::string> names;
  for (const CpuTarget& t : targets) {
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate target name " << t.name;
    ASSERT_TRUE(SelectCpuTarget(t.name).ok()) << t.name;
    EXPECT_EQ(ActiveCpuTarget().name, t.name);
    EXPECT_EQ(ActiveCpuTarget().highway, t.highway);
    for (CpuExtension e : {CpuExtension::kAvxVnni, CpuExtension::kDotProd, CpuExtension::kI8mm}) {
      EXPECT_EQ(CpuExtensionActive(e), (t.extensions & uint32_t(e)) != 0) << t.name;
    }
    // The list does not depend on what is selected.
    EXPECT_EQ(AvailableCpuTargets().size(), targets.size()) << t.name;
  }
  ASSERT_TRUE(SelectCpuTarget("best").ok());
  EXPECT_EQ(ActiveCpuTarget().name, targets.front().name);
}

TEST(CpuTarget, AnUnknownNameIsAnErrorThatChangesNothing) {
  ASSERT_TRUE(SelectCpuTarget("best").ok());
  const std::string before = ActiveCpuTarget().name;
  const Status st = SelectCpuTarget("avx9000");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'avx9000'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(before), std::string::npos) << "lists the available targets";
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  EXPECT_EQ(ActiveCpuTarget().name, before);
}

}  // namespace
}  // namespace anymoe::kernels
