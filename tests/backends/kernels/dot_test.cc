// The f32 dot and axpy kernels against double-precision references, on every
// Highway target compiled in, for lengths around the vector widths.
#include "backends/cpu/kernels/dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

TEST(DotF32, MatchesReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    for (size_t n : {0u, 1u, 7u, 15u, 16u, 17u, 33u, 64u, 100u, 1000u}) {
      const auto a = testing::UniformFloats(n, 1), b = testing::UniformFloats(n, 2);
      double ref = 0;
      for (size_t i = 0; i < n; ++i) ref += double(a[i]) * b[i];
      EXPECT_NEAR(DotF32(a.data(), b.data(), n), ref, 1e-5 * (1 + std::sqrt(double(n)))) << n;
    }
  });
}

TEST(AxpyF32, MatchesReferenceOnEveryTarget) {
  testing::ForEachTarget([] {
    for (size_t n : {1u, 15u, 16u, 17u, 129u}) {
      const auto x = testing::UniformFloats(n, 3);
      auto out = testing::UniformFloats(n, 4);
      const auto before = out;
      AxpyF32(0.5f, x.data(), out.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], before[i] + 0.5f * x[i]);
    }
  });
}

}  // namespace
}  // namespace anymoe::kernels
