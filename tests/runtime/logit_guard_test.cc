// The non-finite logit guard: finite logits pass; the first NaN or infinity
// is named by token id, and the message carries the prefix the server maps to
// its numerical_error code.
#include "runtime/logit_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace anymoe {
namespace {

TEST(LogitGuard, FiniteLogitsPassAndNonFiniteOnesAreNamed) {
  std::vector<float> logits = {0.0f, -0.0f, 1e30f, -1e30f, std::numeric_limits<float>::denorm_min(),
                               -3.5f};
  EXPECT_TRUE(CheckLogitsFinite(logits).ok());
  EXPECT_TRUE(CheckLogitsFinite({}).ok());
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> l = logits;
    l[4] = bad;
    const Status st = CheckLogitsFinite(l);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind(kNumericalErrorPrefix, 0), 0u) << st.message();
    EXPECT_NE(st.message().find("token 4 of 6"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::isnan(bad) ? "NaN" : "infinite"), std::string::npos);
  }
}

// A vocabulary-sized row: a bad logit is found in every lane of the vectorised
// pass and in the tail after it.
TEST(LogitGuard, FindsABadLogitAnywhereInALongRow) {
  std::vector<float> row(49152 + 3, 1.5f);
  EXPECT_TRUE(CheckLogitsFinite(row).ok());
  for (size_t at : {size_t(0), size_t(17), size_t(40000), row.size() - 1}) {
    std::vector<float> l = row;
    l[at] = std::numeric_limits<float>::quiet_NaN();
    const Status st = CheckLogitsFinite(l);
    ASSERT_FALSE(st.ok()) << at;
    EXPECT_NE(st.message().find("token " + std::to_string(at) + " of"), std::string::npos)
        << st.message();
  }
}

}  // namespace
}  // namespace anymoe
