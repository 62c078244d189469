// MoE routing and the row moves around the experts and the paged cache, as
// kernels/moe.cl. The router is the CPU backend's RouteToken
// (backends/cpu/route.cc) run by one thread per token, with its scratch in
// device memory: softmax or sigmoid scores in f32, optional selection bias,
// group-limited selection (sum of each group's two best), top-k with ties to
// the lower id, renormalisation and scaling.
#include <cmath>

#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

// Index of the largest value not yet taken; ties to the lower index.
__device__ int ArgmaxNotTaken(const float* v, int n, const int* taken) {
  int best = -1;
  for (int i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (best < 0 || v[i] > v[best]) best = i;
  }
  return best;
}

// scratch per token: [e score | e sel | e taken | groups group score | groups taken].
__global__ void RouteKernel(const float* logits, const float* bias, int tokens, int e,
                            bool sigmoid, int k, int n_group, int topk_group, bool normalize,
                            float scaling, float* scratch, int32_t* ids, float* weights) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const int groups = n_group > 1 ? n_group : 1;
  const float* lg = logits + int64_t(t) * e;
  float* score = scratch + int64_t(t) * (3 * e + 2 * groups);
  float* sel = score + e;
  int* taken = reinterpret_cast<int*>(sel + e);
  float* group_score = reinterpret_cast<float*>(taken + e);
  int* group_taken = reinterpret_cast<int*>(group_score + groups);
  if (!sigmoid) {
    float mx = lg[0];
    for (int i = 1; i < e; ++i) mx = lg[i] > mx ? lg[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < e; ++i) sum += (score[i] = expf(lg[i] - mx));
    for (int i = 0; i < e; ++i) score[i] /= sum;
  } else {
    for (int i = 0; i < e; ++i) score[i] = 1.0f / (1.0f + expf(-lg[i]));
  }
  for (int i = 0; i < e; ++i) sel[i] = score[i] + (bias ? bias[i] : 0.0f);
  if (n_group > 1) {  // keep the topk_group groups with the best sum of their two best
    const int per = e / n_group;
    for (int g = 0; g < n_group; ++g) {
      float a = -INFINITY, b = -INFINITY;
      for (int i = 0; i < per; ++i) {
        const float s = sel[g * per + i];
        if (s > a) {
          b = a;
          a = s;
        } else if (s > b) {
          b = s;
        }
      }
      group_score[g] = a + b;
      group_taken[g] = 0;
    }
    for (int r = 0; r < topk_group; ++r) {
      group_taken[ArgmaxNotTaken(group_score, n_group, group_taken)] = 1;
    }
    for (int g = 0; g < n_group; ++g) {
      if (group_taken[g]) continue;
      for (int i = 0; i < per; ++i) sel[g * per + i] = -INFINITY;
    }
  }
  for (int i = 0; i < e; ++i) taken[i] = 0;
  float total = 0.0f;
  int32_t* out_ids = ids + int64_t(t) * k;
  float* out_w = weights + int64_t(t) * k;
  for (int j = 0; j < k; ++j) {
    const int x = ArgmaxNotTaken(sel, e, taken);
    taken[x] = 1;
    out_ids[j] = x;
    out_w[j] = score[x];
    total += score[x];
  }
  const float denom = sigmoid ? total + 1e-20f : total;
  for (int j = 0; j < k; ++j) {
    if (normalize) out_w[j] /= denom;
    out_w[j] *= scaling;
  }
}

__global__ void ScatterRowsKernel(const uint32_t* src, const int32_t* rows, int n_rows,
                                  uint32_t* dst, int row_words) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n_rows) * row_words) return;
  const int64_t r = i / row_words, j = i % row_words;
  dst[int64_t(rows[r]) * row_words + j] = src[i];
}

__global__ void GatherRowsKernel(const uint32_t* src, const int32_t* rows, int n_rows,
                                 uint32_t* dst, int row_words) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n_rows) * row_words) return;
  const int64_t r = i / row_words, j = i % row_words;
  dst[i] = src[int64_t(rows[r]) * row_words + j];
}

// One thread per column; a token's experts add up in the CPU backend's order.
__global__ void ScatterAddRowsKernel(const float* src, const int32_t* rows, const float* scales,
                                     int n_rows, float* dst, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  for (int i = 0; i < n_rows; ++i) {
    dst[int64_t(rows[i]) * n + j] += scales[i] * src[int64_t(i) * n + j];
  }
}

}  // namespace

void Route(const float* logits, const float* bias, int tokens, int e, bool sigmoid, int k,
           int n_group, int topk_group, bool normalize, float scaling, float* scratch,
           int32_t* ids, float* weights, const Stream& s) {
  if (tokens == 0) return;
  RouteKernel<<<Blocks(tokens, 64), 64, 0, s.stream>>>(logits, bias, tokens, e, sigmoid, k, n_group,
                                                topk_group, normalize, scaling, scratch, ids,
                                                weights);
  CheckLaunch(s, "Route");
}

void ScatterRows(const uint32_t* src, const int32_t* rows, int n_rows, uint32_t* dst,
                 int row_words, const Stream& s) {
  const int64_t total = int64_t(n_rows) * row_words;
  if (total == 0) return;
  ScatterRowsKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(src, rows, n_rows, dst, row_words);
  CheckLaunch(s, "ScatterRows");
}

void GatherRows(const uint32_t* src, const int32_t* rows, int n_rows, uint32_t* dst,
                int row_words, const Stream& s) {
  const int64_t total = int64_t(n_rows) * row_words;
  if (total == 0) return;
  GatherRowsKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(src, rows, n_rows, dst, row_words);
  CheckLaunch(s, "GatherRows");
}

void ScatterAddRows(const float* src, const int32_t* rows, const float* scales, int n_rows,
                    float* dst, int n, const Stream& s) {
  if (n_rows == 0 || n == 0) return;
  ScatterAddRowsKernel<<<Blocks(n, 256), 256, 0, s.stream>>>(src, rows, scales, n_rows, dst, n);
  CheckLaunch(s, "ScatterAddRows");
}

}  // namespace anymoe::cuda::kernels
