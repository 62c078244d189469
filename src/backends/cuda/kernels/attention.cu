// Causal attention with an online softmax over rows of a paged cache, for
// Attention (GQA: keys = rows[0 .. n_past + t]), a step's batched attention
// (each query its sequence's rows, at starts[t], and a count) and
// LatentAttention (the latent row is key and value; with DSA each query has
// its own rows and a count).
// One block per (query token, head), as kernels/attention.cl; here the block's
// warps split the keys (each warp keeps its own running max, denominator and
// output), lanes split the head dims, and the warps' states are merged at the
// end (the flash-decoding combine).
#include <cmath>

#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kDimsPerLane = kMaxAttentionDim / kWarp;

__global__ void AttentionKernel(AttentionArgs a) {
  __shared__ float q_s[kMaxAttentionDim];
  __shared__ float max_s[kWarps], denom_s[kWarps];
  __shared__ float acc_s[kWarps][kMaxAttentionDim];
  const int t = blockIdx.x / a.n_h, h = blockIdx.x % a.n_h, kvh = h / a.group;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const float* qh = a.q + (int64_t(t) * a.n_h + h) * a.d_k;
  for (int d = threadIdx.x; d < a.d_k; d += blockDim.x) q_s[d] = qh[d];
  __syncthreads();

  const int n_keys = a.counts ? a.counts[t] : a.n_past + t + 1;
  const int32_t* rows = a.rows + (a.starts ? int64_t(a.starts[t]) : int64_t(t) * a.rows_stride);
  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
  float running_max = -INFINITY, denom = 0.0f;
  for (int j = warp; j < n_keys; j += kWarps) {
    const int64_t key = rows[j];
    const float* kp = a.k + key * a.k_row + int64_t(kvh) * a.d_k;
    float partial = 0.0f;
    for (int d = lane; d < a.d_k; d += kWarp) partial += q_s[d] * kp[d];
    const float s = WarpSum(partial) * a.scale;
    const float new_max = fmaxf(s, running_max);
    const float c = expf(running_max - new_max), p = expf(s - new_max);
    denom = denom * c + p;
    const float* vp = a.v + key * a.v_row + int64_t(kvh) * a.d_v;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + i * kWarp;
      if (d < a.d_v) acc[i] = acc[i] * c + p * vp[d];
    }
    running_max = new_max;
  }

  // Merge the warps: rescale each to the common max, sum, divide.
  if (lane == 0) {
    max_s[warp] = running_max;
    denom_s[warp] = denom;
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + i * kWarp;
    if (d < a.d_v) acc_s[warp][d] = acc[i];
  }
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, max_s[w]);
  float weight[kWarps], total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = max_s[w] == -INFINITY ? 0.0f : expf(max_s[w] - m);  // a warp with no keys
    total += denom_s[w] * weight[w];
  }
  const float inv = 1.0f / total;
  float* o = a.out + (int64_t(t) * a.n_h + h) * a.d_v;
  for (int d = threadIdx.x; d < a.d_v; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += acc_s[w][d] * weight[w];
    o[d] = sum * inv;
  }
}

}  // namespace

void Attention(const AttentionArgs& a, const Stream& s) {
  if (a.tokens == 0 || a.n_h == 0) return;
  AttentionKernel<<<unsigned(a.tokens) * unsigned(a.n_h), kWarps * kWarp, 0, s.stream>>>(a);
  CheckLaunch(s, "Attention");
}

}  // namespace anymoe::cuda::kernels
