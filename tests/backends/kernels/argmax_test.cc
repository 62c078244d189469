// The vectorised argmax against a scalar definition (first maximum, NaN
// skipped, -1 when nothing exceeds -inf), on every Highway target compiled in.
#include "backends/cpu/kernels/argmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

int64_t Reference(const std::vector<float>& x) {
  int64_t id = -1;
  float value = -INFINITY;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > value) {
      value = x[i];
      id = int64_t(i);
    }
  }
  return id;
}

TEST(ArgmaxF32, FirstMaximumOnEveryTarget) {
  testing::ForEachTarget([] {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t n : {0u, 1u, 5u, 16u, 17u, 33u, 100u, 49152u, 49155u}) {
      auto x = testing::UniformFloats(n, uint32_t(n) + 1);
      EXPECT_EQ(ArgmaxF32(x.data(), n), Reference(x)) << n;
      if (n < 5) continue;
      // Ties: the same maximum in several lanes and twice in one lane.
      for (size_t j : {n - 1, n / 2, size_t(3), n / 2 + 16}) {
        if (j < n) x[j] = 2.0f;
      }
      EXPECT_EQ(ArgmaxF32(x.data(), n), Reference(x)) << n;
      x[2] = nan;
      x[n - 2] = std::numeric_limits<float>::infinity();
      EXPECT_EQ(ArgmaxF32(x.data(), n), int64_t(n - 2)) << n;
    }
    std::vector<float> none(37, -INFINITY);
    none[20] = nan;
    EXPECT_EQ(ArgmaxF32(none.data(), none.size()), -1);
  });
}

}  // namespace
}  // namespace anymoe::kernels
