// DSA lightning indexer top-k in three passes over [tokens, max_keys] scratch,
// as kernels/indexer.cl: scores (summed in the CPU backend's order with
// uncontracted multiplies and adds, so that ties break identically), a rank
// test per key (kept when fewer than topk keys beat it; ties to the lower
// position), and an ascending compaction per query.
#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

__global__ void IndexerScoresKernel(const float* q, const float* keys, const int32_t* key_rows,
                                    const float* hw, int n_heads, int dim, int n_past,
                                    float scale, float* scores, int max_keys) {
  const int u = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (u > n_past + t) return;
  const float* k = keys + int64_t(key_rows[u]) * dim;
  float total = 0.0f;
  for (int h = 0; h < n_heads; ++h) {
    const float* qh = q + (int64_t(t) * n_heads + h) * dim;
    float dot = 0.0f;
    for (int d = 0; d < dim; ++d) dot = __fadd_rn(dot, __fmul_rn(qh[d], k[d]));
    const float relu = fmaxf(0.0f, __fmul_rn(dot, scale));
    total = __fadd_rn(total, __fmul_rn(hw[int64_t(t) * n_heads + h], relu));
  }
  scores[int64_t(t) * max_keys + u] = total;
}

__global__ void IndexerRankKernel(const float* scores, int n_past, int topk, int max_keys,
                                  int32_t* keep) {
  const int u = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  const int n = n_past + t + 1;
  if (u >= n) return;
  const float* s = scores + int64_t(t) * max_keys;
  int better = 0;
  for (int v = 0; v < n && better < topk; ++v) {
    if (s[v] > s[u] || (s[v] == s[u] && v < u)) ++better;
  }
  keep[int64_t(t) * max_keys + u] = n <= topk || better < topk;
}

__global__ void IndexerCompactKernel(const int32_t* keep, int n_past, int topk, int max_keys,
                                     int tokens, int32_t* selection, int32_t* counts) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const int n = n_past + t + 1;
  int c = 0;
  for (int u = 0; u < n && c < topk; ++u) {
    if (keep[int64_t(t) * max_keys + u]) selection[int64_t(t) * topk + c++] = u;
  }
  counts[t] = c;
}

}  // namespace

void IndexerTopK(const float* q, const float* keys, const int32_t* key_rows,
                 const float* head_weights, int n_heads, int dim, int n_past, int tokens,
                 float scale, int topk, float* scores, int32_t* keep, int32_t* selection,
                 int32_t* counts, const Stream& s) {
  if (tokens == 0) return;
  const int max_keys = n_past + tokens;
  const dim3 grid(Blocks(max_keys, 128), unsigned(tokens));
  IndexerScoresKernel<<<grid, 128, 0, s.stream>>>(q, keys, key_rows, head_weights, n_heads, dim, n_past,
                                           scale, scores, max_keys);
  CheckLaunch(s, "IndexerScores");
  IndexerRankKernel<<<grid, 128, 0, s.stream>>>(scores, n_past, topk, max_keys, keep);
  CheckLaunch(s, "IndexerRank");
  IndexerCompactKernel<<<Blocks(tokens, 64), 64, 0, s.stream>>>(keep, n_past, topk, max_keys, tokens,
                                                         selection, counts);
  CheckLaunch(s, "IndexerCompact");
}

}  // namespace anymoe::cuda::kernels
