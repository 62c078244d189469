// The arguments DeviceBackend hands a device backend's kernel launchers, once
// it has checked the op's contract and staged its host arrays. Tensors are
// views of device memory (Tensor::base a region handle, offset in bytes);
// staged arrays are 1-D tensors in the staging ring.
#pragma once

#include <cstdint>
#include <span>

#include "backends/backend.h"

namespace anymoe::device {

// y = x . W^T (+ b) for the one projection.
struct MatmulArgs {
  Tensor x;                                 // [T, K] f32
  std::span<const Projection> projections;  // W [N, K] of a weight dtype, out [T, N]
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
  Tensor y;          // [M, N]
};

// Causal attention with an online softmax over rows of a paged cache, one
// query row t at a time: its keys are rows[t * rows_stride ..][0 .. count(t)),
// count(t) = counts ? counts[t] : n_past + t + 1. Head h reads kv head
// h / group at kvh * d_k of a key row of k_row floats (values: kvh * d_v of
// v_row floats). Serves Attention and LatentAttention (the latent row is key
// and value).
struct AttentionArgs {
  Tensor q;  // [tokens, n_h, d_k]
  Tensor k, v;
  Tensor rows;                      // staged i32
  int64_t rows_stride = 0;
  const Tensor* counts = nullptr;   // staged i32 [tokens]
  int64_t n_past = 0, tokens = 0, n_h = 0, group = 1;
  int64_t k_row = 0, v_row = 0, d_k = 0, d_v = 0;
  float scale = 1.0f;
  Tensor out;  // [tokens, n_h, d_v]
};

// DSA lightning indexer in three passes over [T, max_keys] scratch (scores,
// rank test, ascending compaction); see Backend::IndexerTopK.
struct IndexerArgs {
  Tensor q, pool, head_weights;
  Tensor rows;  // staged i32 [max_keys]
  int64_t n_heads = 0, dim = 0, n_past = 0, tokens = 0, topk = 0;
  float scale = 1.0f;
  Tensor scores, keep;         // staged scratch [T, max_keys]
  Tensor selection, counts;    // staged results [T, topk], [T]
};

}  // namespace anymoe::device
