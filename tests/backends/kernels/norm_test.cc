// The vectorised RMSNorm against the scalar definition (sum of squares in
// double, in order), on every Highway target compiled in, for lengths around
// the vector widths.
#include "backends/cpu/kernels/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

std::vector<float> Reference(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  double sum = 0.0;
  for (float v : x) sum += double(v) * double(v);
  const float inv = 1.0f / std::sqrt(float(sum / double(x.size())) + eps);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = (x[i] * inv) * w[i];
  return out;
}

// The sum's order differs from the scalar loop only below double precision,
// far under a float's rounding, so the outputs are the same bits.
TEST(RmsNormRow, GivesTheScalarDefinitionsBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    for (size_t n : {1u, 7u, 16u, 17u, 37u, 64u, 100u, 576u, 4096u}) {
      const auto x = testing::UniformFloats(n, 1), w = testing::UniformFloats(n, 2);
      std::vector<float> out(n);
      RmsNormRow(x.data(), w.data(), 1e-5f, int64_t(n), out.data());
      EXPECT_EQ(out, Reference(x, w, 1e-5f)) << n;
    }
  });
}

// One value whose square overflows a float (2e19^2 = 4e38), with a mean
// square that does not: a float sum would give inf and zero outputs, the
// double sum a row of mean square 1. In place (out == x), as the CPU backend
// may call it.
TEST(RmsNormRow, HugeValuesInPlaceOnEveryTarget) {
  testing::ForEachTarget([] {
    const size_t n = 45;
    auto x = testing::UniformFloats(n, 3);
    for (float& v : x) v *= 1e18f;
    x[17] = 2e19f;
    const std::vector<float> w(n, 1.0f);
    const auto expected = Reference(x, w, 1e-6f);
    RmsNormRow(x.data(), w.data(), 1e-6f, int64_t(n), x.data());
    EXPECT_EQ(x, expected);
    double sum = 0.0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      sum += double(v) * v;
    }
    EXPECT_NEAR(sum / double(n), 1.0, 1e-5);
  });
}

}  // namespace
}  // namespace anymoe::kernels
