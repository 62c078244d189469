// The vectorised f32 -> f16 row conversion against the scalar definition
// (core/half.h), on every Highway target compiled in: ordinary values, ties,
// subnormals, overflow, infinities and NaN.
#include "backends/cpu/kernels/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

std::vector<float> EdgeValues() {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, -1e6f,
                          6.1035156e-05f,  // smallest normal f16
                          5.9604645e-08f,  // smallest subnormal f16
                          2.9802322e-08f,  // half of it: a tie, rounds to zero
                          4.4703484e-08f,  // 0.75 of it: rounds up
                          1.0009765625f,   // 1 + 2^-10: exact
                          1.00048828125f,  // 1 + 2^-11: a tie, rounds to even (1)
                          1.00146484375f,  // 1 + 3 * 2^-11: a tie, rounds to even (up)
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 1e-30f};
  const auto random = testing::UniformFloats(61, 5);
  for (float v : random) x.push_back(v * 300.0f);
  return x;
}

TEST(F32ToF16Row, GivesTheScalarBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    const auto x = EdgeValues();
    for (size_t n : {x.size(), size_t(1), size_t(17)}) {
      std::vector<uint16_t> out(n, 0xdead);
      F32ToF16Row(x.data(), out.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], F32ToF16(x[i])) << "value " << x[i];
    }
  });
}

TEST(F32ToF16Row, KeepsNaNOnEveryTarget) {
  testing::ForEachTarget([] {
    std::vector<float> x(19, std::numeric_limits<float>::quiet_NaN());
    std::vector<uint16_t> out(x.size());
    F32ToF16Row(x.data(), out.data(), x.size());
    for (uint16_t h : out) EXPECT_TRUE(std::isnan(F16ToF32(h)));
  });
}

}  // namespace
}  // namespace anymoe::kernels
