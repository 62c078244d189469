// Row normalisations, rotary embedding and the element-wise ops. Mirrors
// kernels/norm.cl and kernels/elementwise.cl of the OpenCL backend; norms use
// one block per row.
#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

constexpr int kNormThreads = 256;

__global__ void RmsNormKernel(const float* x, const float* w, float eps, int n, float* out) {
  __shared__ float red[32];
  const float* xr = x + int64_t(blockIdx.x) * n;
  float* o = out + int64_t(blockIdx.x) * n;
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
  const float inv = 1.0f / sqrtf(BlockSum(s, red) / float(n) + eps);
  // out may alias x: every thread has read its elements of x above (BlockSum syncs).
  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = (xr[i] * inv) * w[i];
}

__global__ void LayerNormKernel(const float* x, const float* w, const float* b, float eps, int n,
                                float* out) {
  __shared__ float red[32];
  const float* xr = x + int64_t(blockIdx.x) * n;
  float* o = out + int64_t(blockIdx.x) * n;
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
  const float mean = BlockSum(s, red) / float(n);
  float v = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += (xr[i] - mean) * (xr[i] - mean);
  const float inv = 1.0f / sqrtf(BlockSum(v, red) / float(n) + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
}

// One thread per rotated pair (i, head, token); the angle in f32, then cos/sin,
// as the CPU backend's RopeToken.
__global__ void RopeKernel(float* x, int tokens, int heads, int head_dim, const int32_t* pos,
                           const float* inv_freq, int rotary_dims, int rotary_offset,
                           float factor, bool interleaved) {
  const int half = rotary_dims / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(tokens) * heads * half) return;
  const int i = int(idx % half), h = int(idx / half % heads);
  const int64_t t = idx / half / heads;
  const float angle = float(pos[t]) * inv_freq[i];
  const float c = cosf(angle) * factor, s = sinf(angle) * factor;
  float* z = x + (t * heads + h) * head_dim + rotary_offset;
  const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
  const float za = z[a], zb = z[b];
  z[a] = za * c - zb * s;
  z[b] = zb * c + za * s;
}

__global__ void SwiGluKernel(const float* g, const float* u, float* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = g[i];
  out[i] = x / (1.0f + expf(-x)) * u[i];
}

__global__ void AddKernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void CopyColumnsKernel(const float* src, int src_cols, int src_col, float* dst,
                                  int dst_cols, int dst_col, int rows, int n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(rows) * n) return;
  const int64_t r = i / n, j = i % n;
  dst[r * dst_cols + dst_col + j] = src[r * src_cols + src_col + j];
}

}  // namespace

void RmsNorm(const float* x, const float* w, float eps, int rows, int n, float* out,
             const Stream& s) {
  if (rows == 0) return;
  RmsNormKernel<<<unsigned(rows), kNormThreads, 0, s.stream>>>(x, w, eps, n, out);
  CheckLaunch(s, "RmsNorm");
}

void LayerNorm(const float* x, const float* w, const float* b, float eps, int rows, int n,
               float* out, const Stream& s) {
  if (rows == 0) return;
  LayerNormKernel<<<unsigned(rows), kNormThreads, 0, s.stream>>>(x, w, b, eps, n, out);
  CheckLaunch(s, "LayerNorm");
}

void Rope(float* x, int tokens, int heads, int head_dim, const int32_t* positions,
          const float* inv_freq, int rotary_dims, int rotary_offset, float factor,
          bool interleaved, const Stream& s) {
  const int64_t total = int64_t(tokens) * heads * (rotary_dims / 2);
  if (total == 0) return;
  RopeKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(x, tokens, heads, head_dim, positions, inv_freq,
                                                rotary_dims, rotary_offset, factor, interleaved);
  CheckLaunch(s, "Rope");
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n, const Stream& s) {
  if (n == 0) return;
  SwiGluKernel<<<Blocks(n, 256), 256, 0, s.stream>>>(gate, up, out, n);
  CheckLaunch(s, "SwiGlu");
}

void Add(const float* a, const float* b, float* out, int64_t n, const Stream& s) {
  if (n == 0) return;
  AddKernel<<<Blocks(n, 256), 256, 0, s.stream>>>(a, b, out, n);
  CheckLaunch(s, "Add");
}

void CopyColumns(const float* src, int src_cols, int src_col, float* dst, int dst_cols,
                 int dst_col, int rows, int n, const Stream& s) {
  const int64_t total = int64_t(rows) * n;
  if (total == 0) return;
  CopyColumnsKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(src, src_cols, src_col, dst, dst_cols,
                                                       dst_col, rows, n);
  CheckLaunch(s, "CopyColumns");
}

}  // namespace anymoe::cuda::kernels
