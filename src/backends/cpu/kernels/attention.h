// One attention query on the CPU in a single pass over the keys (online
// softmax over blocks of 64 keys): each key and value row read once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace anymoe::kernels {

// out[0..d_v) = sum_j softmax_j(scale * q . k_j) v_j over n_keys keys: keys
// 0..n_keys-1, or key_ids[0..n_keys) when key_ids is given. Key j's vectors are
// at k + j * k_stride and v + j * v_stride.
void AttendOnlineSoftmax(const float* q, const float* k, const float* v, int64_t n_keys,
                         const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                         int64_t d_v, float scale, float* out);

// The same for n_q queries that share keys and values (the query heads of one
// GQA group): query g at q + g * q_stride, its output at out + g * out_stride.
// Each block of key and value rows is read from memory once for all of them.
void AttendOnlineSoftmaxGroup(const float* q, int64_t n_q, int64_t q_stride, const float* k,
                              const float* v, int64_t n_keys, const int32_t* key_ids,
                              int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                              float scale, float* out, int64_t out_stride);

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up, n elements; out may alias gate.
void SiluMul(const float* gate, const float* up, float* out, size_t n);

}  // namespace anymoe::kernels
