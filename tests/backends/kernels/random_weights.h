// Random but valid weights of any type the integer matmul takes, for the
// kernel tests: random bytes with small positive f16 scales (and mins), so no
// block holds inf or NaN; f16 / bf16 from uniform floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe::kernels {

inline std::vector<uint8_t> RandomWeights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint64_t bytes = BytesFor(t, uint64_t(rows * cols)).value();
  std::vector<uint8_t> b(bytes);
  if (t == DType::kF16 || t == DType::kBF16) {
    const auto f = testing::UniformFloats(size_t(rows * cols), seed);
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t h = t == DType::kF16 ? F32ToF16(f[i]) : F32ToBF16(f[i]);
      std::memcpy(&b[i * 2], &h, 2);
    }
    return b;
  }
  for (auto& x : b) x = uint8_t(rng());
  std::vector<size_t> scale_offsets = {0};
  if (t == DType::kQ4_1 || t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ5_1)
    scale_offsets = {0, 2};
  if (t == DType::kQ6_K) scale_offsets = {208};
  if (t == DType::kQ2_K) scale_offsets = {80, 82};
  if (t == DType::kQ3_K) scale_offsets = {108};
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  const size_t block_bytes = size_t(Info(t).block_bytes);
  for (size_t blk = 0; blk < bytes / block_bytes; ++blk) {
    if (t == DType::kMXFP4) {  // an e8m0 exponent byte: scales 2^-10 .. 2^-3
      b[blk * block_bytes] = uint8_t(117 + rng() % 8);
      continue;
    }
    if (t == DType::kIQ1_M) {  // the f16 d in the top nibbles of the 4 u16 scales
      const uint16_t h = F32ToF16(sd(rng));
      for (int i = 0; i < 4; ++i) {
        uint8_t& top = b[blk * block_bytes + 48 + 2 * size_t(i) + 1];
        top = uint8_t((top & 0x0f) | ((h >> (4 * i)) & 0x0f) << 4);
      }
      continue;
    }
    for (size_t off : scale_offsets) {
      const uint16_t h = F32ToF16(sd(rng));
      std::memcpy(&b[blk * block_bytes + off], &h, 2);
    }
  }
  return b;
}

}  // namespace anymoe::kernels
