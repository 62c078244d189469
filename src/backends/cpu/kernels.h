// Scalar-reference and BLAS-backed CPU kernels behind the CPU backend. Each
// takes host pointers and a row range so the backend can split work across its
// thread pool; none allocates.
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"

namespace anymoe::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] for one row of n.
void RmsNormRow(const float* x, const float* w, float eps, int64_t n, float* out);

// Rotates every head of one token in place: x [heads, head_dim].
// Rotates dims [rotary_offset, rotary_offset + rotary_dims) of every head.
void RopeToken(float* x, int64_t heads, int64_t head_dim, int32_t position, const RopeTable& rope);

// out = silu(gate) * up over n elements.
void SwiGluRow(const float* gate, const float* up, int64_t n, float* out);

// One query row of one head: softmax(q.K^T * scale) . V over n_keys keys: keys
// 0..n_keys-1, or key_ids[0..n_keys) when key_ids is given. k/v point at the head's
// vectors of key 0; key rows are k_stride/v_stride floats apart. `scores` is
// scratch of at least n_keys floats.
void AttendOneQuery(const float* q, const float* k, const float* v, int64_t n_keys,
                    const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                    int64_t d_v, float scale, float* scores, float* out);

// out = (x - mean) / sqrt(var + eps) * w + b for one row of n.
void LayerNormRow(const float* x, const float* w, const float* b, float eps, int64_t n,
                  float* out);

}  // namespace anymoe::cpu
