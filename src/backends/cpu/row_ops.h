// Small per-row CPU ops behind the CPU backend (LayerNorm, RoPE): scalar code
// that works on one row of host memory; none allocates. The kernels on a
// step's critical path (RMSNorm, attention, matmuls) are Highway code in
// kernels/.
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"

namespace anymoe::cpu {

// Rotates every head of one token in place: x [heads, head_dim].
// Rotates dims [rotary_offset, rotary_offset + rotary_dims) of every head.
void RopeToken(float* x, int64_t heads, int64_t head_dim, int32_t position, const RopeTable& rope);

// RopeToken in two halves: the rotation of `position` (rotary_dims / 2 cosines
// and sines, attention factor included), then the rotation of every head by
// them, so that a step computes each position's angles once for all layers.
void RopeAngles(int32_t position, const RopeTable& rope, float* cos_t, float* sin_t);
void RopeRotate(float* x, int64_t heads, int64_t head_dim, const RopeTable& rope,
                const float* cos_t, const float* sin_t);

// out = (x - mean) / sqrt(var + eps) * w + b for one row of n.
void LayerNormRow(const float* x, const float* w, const float* b, float eps, int64_t n,
                  float* out);

}  // namespace anymoe::cpu
