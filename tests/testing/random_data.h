// Seeded random inputs shared by the kernel tests and the micro-benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace anymoe::testing {

// n floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> UniformFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace anymoe::testing
