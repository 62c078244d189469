// The arguments DeviceBackend hands a device backend's kernel launchers, once
// it has checked the op's contract and staged its host arrays. Tensors are
// views of device memory (Tensor::base a region handle, offset in bytes);
// staged arrays are 1-D tensors in the staging ring.
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"

namespace anymoe::device {

// An FP8 weight's block scales as the kernels take them: element (r, c) of the
// weight view is value * grid[(first_row + r) / block_rows * grid_cols +
// c / block_cols], the formula of DequantizeWeightRows (core/tensor.h), with
// first_row the view's row within the whole matrix. The grid starts
// grid_offset bytes into the device buffer `buffer` (DeviceBackend::
// PrepareWeight's, or an expert cache slot's); null (block_cols 0) for every
// weight without scales.
struct WeightScales {
  void* buffer = nullptr;
  uint64_t grid_offset = 0;
  int64_t block_rows = 1, block_cols = 0, grid_cols = 1, first_row = 0;
};

inline WeightScales ScalesOf(const Tensor& w) {
  if (!w.scales) return {};
  const BlockScales& s = w.scales;
  CHECK(s.rows > 0 && s.cols > 0 && w.offset >= s.matrix_offset &&
        (w.offset - s.matrix_offset) % w.row_bytes() == 0 && s.grid_offset % sizeof(float) == 0);
  return WeightScales{const_cast<void*>(s.data),
                      s.grid_offset,
                      s.rows,
                      s.cols,
                      s.GridCols(w.cols()),
                      int64_t((w.offset - s.matrix_offset) / w.row_bytes())};
}

// y_i = x . W_i^T (+ b_i) for each projection, with the fused parts a backend
// opts into (DeviceTraits::fused_matmul); without that opt-in only plain
// single projections arrive.
struct MatmulArgs {
  Tensor x;                      // [T, K] f32
  const Tensor* norm = nullptr;  // [K] f32: multiply rmsnorm(x) * norm instead of x
  float eps = 0.0f;
  std::span<const Projection> projections;  // W_i [N_i, K] of a weight dtype, out_i [T, N_i]
  bool swiglu = false;                      // two projections: out_0 = silu(p_0) * p_1
  const Tensor* residual = nullptr;         // one projection: *residual += p_0 (out_0 unused)
};

// MoE experts in one launch: row m of x (m < rows) belongs to the group g with
// offsets[g] <= m < offsets[g + 1]; its weight starts at locations[g] (see
// DeviceBackend::ExpertLocation), all of weight0's dtype and shape.
struct GroupedMatmulArgs {
  Tensor x;          // [M, K] f32
  Tensor weight0;    // the first group's weight: dtype, row bytes, buffer
  Tensor locations;  // staged u64 [groups]
  Tensor offsets;    // staged i32 [groups + 1]
  int64_t groups = 0, rows = 0;
  Tensor y;  // [M, N]
};

// Causal attention with an online softmax over rows of a paged cache, one
// query row t at a time: its keys are rows[start(t) .. start(t) + count(t)),
// start(t) = starts ? starts[t] : t * rows_stride, count(t) = counts ?
// counts[t] : n_past + t + 1. Head h reads kv head h / group at kvh * d_k of a
// key row of k_row floats (values: kvh * d_v of v_row floats). Serves
// Attention, StepAttention's batched form and LatentAttention (the latent row
// is key and value).
struct AttentionArgs {
  Tensor q;  // [tokens, n_h, d_k]
  Tensor k, v;
  Tensor rows;                     // staged i32
  const Tensor* starts = nullptr;  // staged i32 [tokens]
  int64_t rows_stride = 0;
  const Tensor* counts = nullptr;  // staged i32 [tokens]
  int64_t n_past = 0, tokens = 0, n_h = 0, group = 1;
  int64_t k_row = 0, v_row = 0, d_k = 0, d_v = 0;
  float scale = 1.0f;
  Tensor out;  // [tokens, n_h, d_v]
};

// The GQA form of AttentionArgs: q [T, n_h, d_k] over pools [R, n_kv, d_k]
// and [R, n_kv, d_v] into out [T, n_h, d_v]; the rows are the caller's.
inline AttentionArgs GqaAttentionArgs(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                      float scale, const Tensor& out) {
  const int64_t n_h = q.dim(1), n_kv = k_pool.dim(1);
  AttentionArgs a;
  a.q = q;
  a.k = k_pool;
  a.v = v_pool;
  a.tokens = q.dim(0);
  a.n_h = n_h;
  a.group = n_h / n_kv;
  a.d_k = q.dim(2);
  a.d_v = v_pool.dim(2);
  a.k_row = n_kv * a.d_k;
  a.v_row = n_kv * a.d_v;
  a.scale = scale;
  a.out = out;
  return a;
}

// A decode step's GQA attention in one launch (DeviceTraits::fused_decode_attention):
// every sequence has one new token, row t. Rotates q[t] and k[t] at
// positions[t], writes k[t] and v[t] to cache row rows[starts[t] + positions[t]],
// and attends over rows[starts[t] .. + positions[t]] then the new key itself.
struct DecodeAttentionArgs {
  Tensor q, k, v;         // [T, n_h, d], [T, n_kv, d_k], [T, n_kv, d_v]
  Tensor k_pool, v_pool;  // [R, n_kv, d_k], [R, n_kv, d_v]
  Tensor rows;            // staged i32: the sequences' key rows, concatenated
  Tensor starts;          // staged i32 [T]
  Tensor positions;       // staged i32 [T]
  Tensor inv_freq;        // staged f32 [rotary_dims / 2]
  const RopeTable* rope = nullptr;
  float scale = 1.0f;
  Tensor out;  // [T, n_h, d_v]
};

// DSA lightning indexer in three passes over [T, max_keys] scratch (scores,
// rank test, ascending compaction); see Backend::IndexerTopK.
struct IndexerArgs {
  Tensor q, pool, head_weights;
  Tensor rows;  // staged i32 [max_keys]
  int64_t n_heads = 0, dim = 0, n_past = 0, tokens = 0, topk = 0;
  float scale = 1.0f;
  Tensor scores, keep;       // staged scratch [T, max_keys]
  Tensor selection, counts;  // staged results [T, topk], [T]
};

}  // namespace anymoe::device
