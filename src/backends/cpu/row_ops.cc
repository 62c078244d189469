#include "backends/cpu/row_ops.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace anymoe::cpu {

void RopeAngles(int32_t position, const RopeTable& rope, float* cos_t, float* sin_t) {
  for (int i = 0; i < rope.rotary_dims / 2; ++i) {
    // Same order of operations as the reference: angle in f32, then cos/sin.
    const float angle = float(position) * rope.inv_freq[size_t(i)];
    cos_t[i] = std::cos(angle) * rope.attention_factor;
    sin_t[i] = std::sin(angle) * rope.attention_factor;
  }
}

void RopeToken(float* x, int64_t heads, int64_t head_dim, int32_t position,
               const RopeTable& rope) {
  constexpr int kMaxHalf = 512;
  CHECK(rope.rotary_dims / 2 <= kMaxHalf);
  float cos_t[kMaxHalf], sin_t[kMaxHalf];
  RopeAngles(position, rope, cos_t, sin_t);
  RopeRotate(x, heads, head_dim, rope, cos_t, sin_t);
}

void RopeRotate(float* x, int64_t heads, int64_t head_dim, const RopeTable& rope,
                const float* cos_t, const float* sin_t) {
  const int half = rope.rotary_dims / 2;
  CHECK(rope.rotary_offset + rope.rotary_dims <= head_dim);
  for (int64_t h = 0; h < heads; ++h) {
    float* z = x + h * head_dim + rope.rotary_offset;
    for (int i = 0; i < half; ++i) {
      const int a = rope.pairing == RopePairing::kHalfSplit ? i : 2 * i;
      const int b = rope.pairing == RopePairing::kHalfSplit ? i + half : 2 * i + 1;
      const float za = z[a], zb = z[b];
      z[a] = za * cos_t[i] - zb * sin_t[i];
      z[b] = zb * cos_t[i] + za * sin_t[i];
    }
  }
}

void LayerNormRow(const float* x, const float* w, const float* b, float eps, int64_t n,
                  float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = float(sum / double(n));
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += double(x[i] - mean) * double(x[i] - mean);
  const float inv = 1.0f / std::sqrt(float(var / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean) * inv * w[i] + b[i];
}

}  // namespace anymoe::cpu
