// Weight x activation kernels: the decode matvec (quantised blocks decoded in
// registers, weights read once for up to kMatvecTokens tokens), the grouped
// expert matvec, the weight tile dequantiser of the dense-GEMM path, the
// per-head projection and the embedding lookup. Mirrors kernels/matmul.cl of
// the OpenCL backend with one warp (not one work-group) per output row.
#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, one output row each

// This lane's share of the dots of weight row `row` with x[t, 0..k) for
// t < tokens (x rows k floats apart), added to acc[t].
__device__ void LaneDots(const char* row, int dtype, const float* x, int tokens, int k,
                         float (&acc)[kMatvecTokens]) {
  const int lane = threadIdx.x % kWarp;
  if (dtype == kQ8_0 || dtype == kQ4_0 || dtype == kQ4_1) {
    const int bb = BlockBytes(dtype);
    for (int blk = lane; blk < k / 32; blk += kWarp) {
      const char* b = row + int64_t(bb) * blk;
      const float d = HalfAt(b);
      float s[kMatvecTokens] = {}, xsum[kMatvecTokens] = {};
      if (dtype == kQ8_0) {
        const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll 4
        for (int i = 0; i < 32; ++i) {
          const float qi = float(q[i]);
#pragma unroll
          for (int t = 0; t < kMatvecTokens; ++t) {
            if (t < tokens) s[t] += qi * x[int64_t(t) * k + 32 * blk + i];
          }
        }
      } else {
        const uint8_t* q = reinterpret_cast<const uint8_t*>(b + (dtype == kQ4_0 ? 2 : 4));
        const int bias = dtype == kQ4_0 ? 8 : 0;
#pragma unroll 4
        for (int i = 0; i < 16; ++i) {
          const float lo = float((q[i] & 15) - bias), hi = float((q[i] >> 4) - bias);
#pragma unroll
          for (int t = 0; t < kMatvecTokens; ++t) {
            if (t >= tokens) continue;
            const float* xb = x + int64_t(t) * k + 32 * blk;
            s[t] += lo * xb[i] + hi * xb[i + 16];
            if (dtype == kQ4_1) xsum[t] += xb[i] + xb[i + 16];
          }
        }
      }
      const float m = dtype == kQ4_1 ? HalfAt(b + 2) : 0.0f;
#pragma unroll
      for (int t = 0; t < kMatvecTokens; ++t) acc[t] += d * s[t] + m * xsum[t];
    }
  } else {
    for (int j = lane; j < k; j += kWarp) {
      const float w = WeightAt(row, dtype, j);
#pragma unroll
      for (int t = 0; t < kMatvecTokens; ++t) {
        if (t < tokens) acc[t] += w * x[int64_t(t) * k + j];
      }
    }
  }
}

__global__ void MatvecKernel(const float* x, const char* w, uint64_t w_row_bytes, int dtype,
                             const float* bias, float* y, int tokens, int k, int n) {
  const int lane = threadIdx.x % kWarp;
  const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (o >= n) return;  // the whole warp leaves; no block-wide sync follows
  const int t0 = blockIdx.y * kMatvecTokens;
  const int nt = min(kMatvecTokens, tokens - t0);
  float acc[kMatvecTokens] = {};
  LaneDots(w + w_row_bytes * o, dtype, x + int64_t(t0) * k, nt, k, acc);
#pragma unroll
  for (int t = 0; t < kMatvecTokens; ++t) {
    const float dot = WarpSum(acc[t]);
    if (lane == 0 && t < nt) y[int64_t(t0 + t) * n + o] = dot + (bias ? bias[o] : 0.0f);
  }
}

__global__ void GroupedMatvecKernel(const float* x, const char* const* w_groups,
                                    uint64_t w_row_bytes, int dtype, const int32_t* offsets,
                                    int groups, float* y, int k, int n) {
  const int lane = threadIdx.x % kWarp;
  const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  const int m = blockIdx.y;
  if (o >= n) return;
  int g = 0;
  while (g + 1 < groups && offsets[g + 1] <= m) ++g;
  float acc[kMatvecTokens] = {};
  LaneDots(w_groups[g] + w_row_bytes * o, dtype, x + int64_t(m) * k, 1, k, acc);
  const float dot = WarpSum(acc[0]);
  if (lane == 0) y[int64_t(m) * n + o] = dot;
}

__global__ void DequantizeRowsKernel(const char* w, uint64_t w_row_bytes, int dtype, int rows,
                                     int k, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(rows) * k) return;
  const int64_t r = i / k, j = i % k;
  out[i] = WeightAt(w + w_row_bytes * r, dtype, int(j));
}

__global__ void AddBiasKernel(float* y, const float* bias, int tokens, int n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < int64_t(tokens) * n) y[i] += bias[i % n];
}

__global__ void HeadMatmulKernel(const float* x, int x_stride, const float* w, float* y,
                                 int y_stride, int tokens, int n_h, int d_out, int d_in) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(tokens) * n_h * d_out) return;
  const int o = int(i % d_out), h = int(i / d_out % n_h);
  const int64_t t = i / d_out / n_h;
  const float* xr = x + (t * n_h + h) * x_stride;
  const float* wr = w + (int64_t(h) * d_out + o) * d_in;
  float acc = 0.0f;
  for (int j = 0; j < d_in; ++j) acc += wr[j] * xr[j];
  y[(t * n_h + h) * y_stride + o] = acc;
}

__global__ void EmbeddingKernel(const char* table, uint64_t row_bytes, int dtype,
                                const int32_t* ids, int tokens, float* out, int h) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(tokens) * h) return;
  const int64_t t = i / h;
  out[i] = WeightAt(table + row_bytes * uint64_t(ids[t]), dtype, int(i % h));
}

}  // namespace

void Matvec(const float* x, const char* w, uint64_t w_row_bytes, int dtype, const float* bias,
            float* y, int tokens, int k, int n, cudaStream_t s) {
  if (tokens == 0 || n == 0) return;
  const dim3 grid(Blocks(n, kRowsPerBlock), Blocks(tokens, kMatvecTokens));
  MatvecKernel<<<grid, kRowsPerBlock * kWarp, 0, s>>>(x, w, w_row_bytes, dtype, bias, y, tokens,
                                                      k, n);
  CheckLaunch("Matvec");
}

void GroupedMatvec(const float* x, const char* const* w_groups, uint64_t w_row_bytes, int dtype,
                   const int32_t* offsets, int groups, float* y, int rows, int k, int n,
                   cudaStream_t s) {
  if (rows == 0 || n == 0) return;
  const dim3 grid(Blocks(n, kRowsPerBlock), unsigned(rows));
  GroupedMatvecKernel<<<grid, kRowsPerBlock * kWarp, 0, s>>>(x, w_groups, w_row_bytes, dtype,
                                                             offsets, groups, y, k, n);
  CheckLaunch("GroupedMatvec");
}

void DequantizeRows(const char* w, uint64_t w_row_bytes, int dtype, int rows, int k, float* out,
                    cudaStream_t s) {
  const int64_t n = int64_t(rows) * k;
  if (n == 0) return;
  DequantizeRowsKernel<<<Blocks(n, 256), 256, 0, s>>>(w, w_row_bytes, dtype, rows, k, out);
  CheckLaunch("DequantizeRows");
}

void AddBias(float* y, const float* bias, int tokens, int n, cudaStream_t s) {
  const int64_t total = int64_t(tokens) * n;
  if (total == 0) return;
  AddBiasKernel<<<Blocks(total, 256), 256, 0, s>>>(y, bias, tokens, n);
  CheckLaunch("AddBias");
}

void HeadMatmul(const float* x, int x_stride, const float* w, float* y, int y_stride, int tokens,
                int n_h, int d_out, int d_in, cudaStream_t s) {
  const int64_t total = int64_t(tokens) * n_h * d_out;
  if (total == 0) return;
  HeadMatmulKernel<<<Blocks(total, 128), 128, 0, s>>>(x, x_stride, w, y, y_stride, tokens, n_h,
                                                      d_out, d_in);
  CheckLaunch("HeadMatmul");
}

void Embedding(const char* table, uint64_t row_bytes, int dtype, const int32_t* ids, int tokens,
               float* out, int h, cudaStream_t s) {
  const int64_t total = int64_t(tokens) * h;
  if (total == 0) return;
  EmbeddingKernel<<<Blocks(total, 256), 256, 0, s>>>(table, row_bytes, dtype, ids, tokens, out,
                                                     h);
  CheckLaunch("Embedding");
}

}  // namespace anymoe::cuda::kernels
