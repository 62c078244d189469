#include "core/quantize_row.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"

namespace anymoe {
namespace {

constexpr int64_t kBlock = 32;

// d = max|x| / 127, q = round(x / d) half away from zero (numpy's np_roundf);
// x * (1 / d) as the reference multiplies, f16 d.
void QuantizeQ8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  const uint16_t h = F32ToF16(d);
  std::memcpy(out, &h, 2);
  for (int64_t i = 0; i < kBlock; ++i) out[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
}

// d = (the value of largest magnitude, first on ties) / -8, q = trunc(x / d +
// 8.5) clipped to 15; value i in the low nibble of byte i, value 16 + i in its
// high nibble.
void QuantizeQ4_0(const float* x, uint8_t* out) {
  float max = 0.0f, amax = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  }
  const float d = max / -8.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  const uint16_t h = F32ToF16(d);
  std::memcpy(out, &h, 2);
  auto q = [&](int64_t i) {
    return std::min<uint8_t>(uint8_t(std::trunc(x[i] * id + 8.5f)), 15);
  };
  for (int64_t i = 0; i < kBlock / 2; ++i) out[2 + i] = uint8_t(q(i) | (q(i + kBlock / 2) << 4));
}

}  // namespace

bool IsRowQuantizable(DType t) { return t == DType::kQ8_0 || t == DType::kQ4_0; }

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  CHECK(IsRowQuantizable(t) && n % kBlock == 0);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t block_bytes = t == DType::kQ8_0 ? 2 + kBlock : 2 + kBlock / 2;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    if (t == DType::kQ8_0) {
      QuantizeQ8_0(src + b * kBlock, out + b * block_bytes);
    } else {
      QuantizeQ4_0(src + b * kBlock, out + b * block_bytes);
    }
  }
}

}  // namespace anymoe
