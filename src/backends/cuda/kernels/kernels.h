// Host-callable launchers of the CUDA kernels (kernels/*.cu), in plain C++ so
// that the backend itself compiles with the host compiler. Every launcher
// enqueues on the given stream and returns at once; pointers are device
// addresses. Each kernel mirrors the OpenCL kernel of the same name
// (src/backends/opencl/kernels/), which PoCL runs in CI: same indexing, same
// order of the sums that decide ties (router, DSA indexer).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels/weight_types.h"

namespace anymoe::cuda {
class CudaDevice;
}  // namespace anymoe::cuda

namespace anymoe::cuda::kernels {

// Where a launcher enqueues: the compute stream, and the device that counts
// every launch (DeviceRuntime::CountLaunch, for `anymoe bench --op-profile`).
struct Stream {
  cudaStream_t stream = nullptr;
  CudaDevice* device = nullptr;
};
// Counts a launch, and aborts when it failed to start (bad configuration).
void CheckLaunch(const Stream& s, const char* kernel);

// An FP8 weight's block scales (device::WeightScales with a device address):
// row r of the view, column c, is value * grid[(first_row + r) / block_rows *
// grid_cols + c / block_cols]; grid null for every other weight.
struct Scales {
  const float* grid = nullptr;
  int block_rows = 1, block_cols = 0, grid_cols = 1, first_row = 0;
};

// Token rows one matvec block keeps in registers (each weight row read once per group).
inline constexpr int kMatvecTokens = 8;

// ---- matmul.cu
// y[t, o] = x[t] . w[o] (+ bias[o]) for t < tokens: one warp per output row.
void Matvec(const float* x, const char* w, uint64_t w_row_bytes, int dtype, const Scales& scales,
            const float* bias, float* y, int tokens, int k, int n, const Stream& s);
// MoE experts in one launch: row m of x belongs to the group g with
// offsets[g] <= m < offsets[g+1], whose [n, k] weight starts at w_groups[g]
// (never block-scaled: DeviceBackend runs those one Matvec per expert).
void GroupedMatvec(const float* x, const char* const* w_groups, uint64_t w_row_bytes, int dtype,
                   const int32_t* offsets, int groups, float* y, int rows, int k, int n,
                   const Stream& s);
// out[r, j] = w[r, j] as f32 for r < rows (the dense-GEMM path's weight tile).
void DequantizeRows(const char* w, uint64_t w_row_bytes, int dtype, const Scales& scales, int rows,
                    int k, float* out, const Stream& s);
// y[t, o] += bias[o].
void AddBias(float* y, const float* bias, int tokens, int n, const Stream& s);
// y[t, h, o] = W[h] (d_out x d_in, f32) . x[t, h], with strided head slots.
void HeadMatmul(const float* x, int x_stride, const float* w, float* y, int y_stride, int tokens,
                int n_h, int d_out, int d_in, const Stream& s);
// out[t] = dequantised table[ids[t]].
void Embedding(const char* table, uint64_t row_bytes, int dtype, const Scales& scales,
               const int32_t* ids, int tokens, float* out, int h, const Stream& s);

// ---- norm.cu (row ops and element-wise ops)
void RmsNorm(const float* x, const float* w, float eps, int rows, int n, float* out,
             const Stream& s);
void LayerNorm(const float* x, const float* w, const float* b, float eps, int rows, int n,
               float* out, const Stream& s);
// In place on x [tokens, heads, head_dim].
void Rope(float* x, int tokens, int heads, int head_dim, const int32_t* positions,
          const float* inv_freq, int rotary_dims, int rotary_offset, float factor,
          bool interleaved, const Stream& s);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n, const Stream& s);
void Add(const float* a, const float* b, float* out, int64_t n, const Stream& s);
void CopyColumns(const float* src, int src_cols, int src_col, float* dst, int dst_cols,
                 int dst_col, int rows, int n, const Stream& s);

// ---- attention.cu: causal attention, online softmax, over rows of a paged cache.
struct AttentionArgs {
  const float* q = nullptr;  // [tokens, n_h, d_k]
  const float* k = nullptr;  // key rows of k_row floats; head kvh at kvh * d_k
  const float* v = nullptr;  // value rows of v_row floats; head kvh at kvh * d_v
  // Cache rows; query t reads rows + starts[t], or rows + t * rows_stride
  // when starts is null.
  const int32_t* rows = nullptr;
  const int32_t* starts = nullptr;
  int rows_stride = 0;
  const int32_t* counts = nullptr;  // keys of query t; null: n_past + t + 1
  int n_past = 0, tokens = 0, n_h = 0, group = 1;  // head h reads kv head h / group
  int k_row = 0, v_row = 0, d_k = 0, d_v = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [tokens, n_h, d_v]
};
inline constexpr int kMaxAttentionDim = 1024;  // d_k and d_v
void Attention(const AttentionArgs& a, const Stream& s);

// ---- indexer.cu: DSA lightning indexer top-k (scores, rank test, compaction).
// scores and keep are [tokens, max_keys] scratch; selection [tokens, topk].
void IndexerTopK(const float* q, const float* keys, const int32_t* key_rows,
                 const float* head_weights, int n_heads, int dim, int n_past, int tokens,
                 float scale, int topk, float* scores, int32_t* keep, int32_t* selection,
                 int32_t* counts, const Stream& s);

// ---- moe.cu
// Router top-k per token (the CPU backend's RouteToken), scratch of
// tokens * (3 * e + 2 * max(n_group, 1)) floats.
void Route(const float* logits, const float* bias, int tokens, int e, bool sigmoid, int k,
           int n_group, int topk_group, bool normalize, float scaling, float* scratch,
           int32_t* ids, float* weights, const Stream& s);
// dst[rows[i]] = src[i], in 4-byte words.
void ScatterRows(const uint32_t* src, const int32_t* rows, int n_rows, uint32_t* dst,
                 int row_words, const Stream& s);
// dst[i] = src[rows[i]], in 4-byte words.
void GatherRows(const uint32_t* src, const int32_t* rows, int n_rows, uint32_t* dst,
                int row_words, const Stream& s);
// dst[rows[i]] += scales[i] * src[i], rows in order.
void ScatterAddRows(const float* src, const int32_t* rows, const float* scales, int n_rows,
                    float* dst, int n, const Stream& s);

}  // namespace anymoe::cuda::kernels
