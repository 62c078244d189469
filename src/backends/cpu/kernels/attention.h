// One attention query on the CPU in a single pass over the keys (online
// softmax over blocks of 64 keys): each key and value row read once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace anymoe::kernels {

// out[0..d_v) = sum_j softmax_j(scale * q . k_j) v_j over n_keys keys: keys
// 0..n_keys-1, or key_ids[0..n_keys) when key_ids is given. Key j's vectors are
// at k + j * k_stride and v + j * v_stride.
void AttendOnlineSoftmax(const float* q, const float* k, const float* v, int64_t n_keys,
                         const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                         int64_t d_v, float scale, float* out);

// The same for every query head of one token, or of one GQA group
// (kv_heads = 1): kv_heads groups of `group` queries that share a kv head,
// query (h, g) at q + (h * group + g) * q_stride and its output at
// out + (h * group + g) * out_stride, kv head h's vectors at k + h * d_k and
// v + h * d_v within each cached row. A group reads each block of its rows
// from memory once; with several kv heads the rows are read front to back,
// every head's slice together. A query's bits do not depend on kv_heads.
void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              const float* k, const float* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride);
// The same over rows cached as IEEE f16 (the bits; strides in values): each
// value is read as the f32 it stands for, and every query gets exactly the bits
// of the f32 call on rows holding those values.
void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              const uint16_t* k, const uint16_t* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride);

// The same over rows of a quantised cache (q8_0 or q4_0 blocks, `type`): k and
// v point at row 0's blocks of the first kv head, k_stride and v_stride are row
// sizes in bytes, head h's slice starts h * d_k values (whole blocks) in. Each
// value is read as the f32 it stands for (exact), and every query gets exactly
// the bits of the f32 call on rows holding those values. d_k, d_v are at most
// kMaxQuantizedHeadDim.
inline constexpr int64_t kMaxQuantizedHeadDim = 512;
void AttendOnlineSoftmaxHeads(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                              DType type, const uint8_t* k, const uint8_t* v, int64_t n_keys,
                              const int32_t* key_ids, int64_t k_stride, int64_t v_stride,
                              int64_t d_k, int64_t d_v, float scale, float* out,
                              int64_t out_stride);

// Keys are taken in blocks of kAttentionBlockKeys (from key 0, or from each
// segment's first key): a query's running max and denominator move once per
// block, so the block boundaries are part of its arithmetic.
inline constexpr int64_t kAttentionBlockKeys = 64;

// Long key ranges are taken in segments of kAttentionSegmentKeys keys
// (segment s: keys s * kAttentionSegmentKeys onwards), each attended on its own
// and then merged, so that the segments of one query can run on different
// threads. Callers split every range longer than one segment this way,
// whatever the batch, so that a query's result does not depend on it.
inline constexpr int64_t kAttentionSegmentKeys = 512;

inline int64_t AttentionSegments(int64_t n_keys) {
  return (n_keys + kAttentionSegmentKeys - 1) / kAttentionSegmentKeys;
}

// Segment `segment` of the n_keys keys for the queries of
// AttendOnlineSoftmaxHeads: query i's unnormalised output at part + i * d_v,
// its running max and denominator at maxes[i] and denoms[i].
void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const float* k, const float* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms);
void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride,
                   const uint16_t* k, const uint16_t* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms);

void AttendSegment(const float* q, int64_t kv_heads, int64_t group, int64_t q_stride, DType type,
                   const uint8_t* k, const uint8_t* v, int64_t n_keys, const int32_t* key_ids,
                   int64_t segment, int64_t k_stride, int64_t v_stride, int64_t d_k, int64_t d_v,
                   float scale, float* part, float* maxes, float* denoms);

// out + i * out_stride = query i's attention over every segment, from segment
// s's outputs at parts + s * part_stride + i * d_v and its maxes and
// denominators at [s * n_q + i]; segments are summed in order.
void MergeSegments(const float* parts, int64_t part_stride, const float* maxes,
                   const float* denoms, int64_t segments, int64_t n_q, int64_t d_v, float* out,
                   int64_t out_stride);

// Prefill: the causal attention of n_tokens consecutive tokens of one
// sequence, as tiles. Token i's kv_heads * group query heads lie at
// q + i * q_token_stride (head stride d_k) and attend keys 0 .. first_keys + i
// - 1; its outputs go to out + i * out_token_stride (head stride d_v). The
// rows are AttendOnlineSoftmaxHeads': `type` kF32 or kF16 (k, v typed as
// stored, strides in values) or q8_0 / q4_0 (strides in bytes); v == k with
// v_stride == k_stride reads each value as the first d_v of its key row (MLA's
// latent). Each block of keys is gathered per kv head into f32 tiles once and
// met by all the tokens' queries together. With segment_keys =
// kAttentionSegmentKeys every query gets exactly the bits of AttendSegment per
// segment and MergeSegments (AttendOnlineSoftmaxHeads when it has one segment);
// with 0, of AttendOnlineSoftmaxHeads over all its keys. scratch holds
// AttendTokensScratch(...) floats.
int64_t AttendTokensScratch(int64_t n_tokens, int64_t first_keys, int64_t kv_heads, int64_t group,
                            int64_t d_k, int64_t d_v, int64_t segment_keys);
void AttendTokens(const float* q, int64_t q_token_stride, int64_t n_tokens, int64_t first_keys,
                  int64_t kv_heads, int64_t group, DType type, const void* k, const void* v,
                  const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                  int64_t d_v, float scale, int64_t segment_keys, float* out,
                  int64_t out_token_stride, float* scratch);

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up, n elements; out may alias gate.
void SiluMul(const float* gate, const float* up, float* out, size_t n);

}  // namespace anymoe::kernels
