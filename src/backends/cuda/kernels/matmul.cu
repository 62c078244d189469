// Weight x activation kernels: the decode matvec (quantised blocks decoded in
// registers, weights read once for up to kMatvecTokens tokens), the grouped
// expert matvec, the weight tile dequantiser of the dense-GEMM path, the
// per-head projection and the embedding lookup. Mirrors kernels/matmul.cl of
// the OpenCL backend in what it computes, with one warp (not one work-group)
// per output row and eight lanes per quantised block.
#include "backends/cuda/kernels/common.cuh"

namespace anymoe::cuda::kernels {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, one output row each

// Eight lanes share a 32-weight block, four weights each, so that a warp reads
// four whole consecutive blocks per step and each x row in 512 consecutive
// bytes: every load of the warp touches four cache lines (a lane per block
// touched 32). Block starts are 2-byte aligned (34-, 18- and 20-byte blocks),
// so quants are read in 16-bit words.
constexpr int kLanesPerBlock = 8;

// The four weights (before the block scale) this lane takes from block `b`,
// and the offsets within the block of the x values they multiply.
struct LaneQuants {
  float w[4];
  int at[4];
};

__device__ __forceinline__ LaneQuants QuantsOfLane(const char* b, int dtype, int sub) {
  LaneQuants q;
  if (dtype == kQ8_0) {  // weights 4 sub .. 4 sub + 3
    const uint16_t* p = reinterpret_cast<const uint16_t*>(b + 2 + 4 * sub);
    const uint16_t lo = p[0], hi = p[1];
    q.w[0] = float(static_cast<int8_t>(lo & 0xff));
    q.w[1] = float(static_cast<int8_t>(lo >> 8));
    q.w[2] = float(static_cast<int8_t>(hi & 0xff));
    q.w[3] = float(static_cast<int8_t>(hi >> 8));
#pragma unroll
    for (int i = 0; i < 4; ++i) q.at[i] = 4 * sub + i;
  } else {  // bytes 2 sub, 2 sub + 1: low nibbles weights 2 sub + {0, 1}, high ones + 16
    const uint16_t p = *reinterpret_cast<const uint16_t*>(b + (dtype == kQ4_0 ? 2 : 4) + 2 * sub);
    const int bias = dtype == kQ4_0 ? 8 : 0;
    q.w[0] = float(int(p & 15) - bias);
    q.w[1] = float(int((p >> 8) & 15) - bias);
    q.w[2] = float(int((p >> 4) & 15) - bias);
    q.w[3] = float(int(p >> 12) - bias);
    q.at[0] = 2 * sub;
    q.at[1] = 2 * sub + 1;
    q.at[2] = 2 * sub + 16;
    q.at[3] = 2 * sub + 17;
  }
  return q;
}

// This lane's share of the dots of weight row `row` with x[t, 0..k) for
// t < tokens (x rows k floats apart), added to acc[t]. An FP8 row's values
// take their block scales from srow (one per s_cols columns; 0: none).
__device__ void LaneDots(const char* row, int dtype, const float* srow, int s_cols, const float* x,
                         int tokens, int k, float (&acc)[kMatvecTokens]) {
  const int lane = threadIdx.x % kWarp;
  if (dtype == kQ8_0 || dtype == kQ4_0 || dtype == kQ4_1) {
    const int bb = BlockBytes(dtype), sub = lane % kLanesPerBlock;
    for (int blk = lane / kLanesPerBlock; blk < k / 32; blk += kWarp / kLanesPerBlock) {
      const char* b = row + int64_t(bb) * blk;
      const float d = HalfAt(b), m = dtype == kQ4_1 ? HalfAt(b + 2) : 0.0f;
      const LaneQuants q = QuantsOfLane(b, dtype, sub);
#pragma unroll
      for (int t = 0; t < kMatvecTokens; ++t) {
        if (t >= tokens) break;
        const float* xb = x + int64_t(t) * k + 32 * blk;
        float s = 0.0f, xsum = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float xi = xb[q.at[i]];
          s += q.w[i] * xi;
          xsum += xi;
        }
        acc[t] += d * s + m * xsum;
      }
    }
  } else {
    for (int j = lane; j < k; j += kWarp) {
      float w = WeightAt(row, dtype, j);
      if (s_cols > 0) w = __fmul_rn(w, srow[j / s_cols]);
#pragma unroll
      for (int t = 0; t < kMatvecTokens; ++t) {
        if (t < tokens) acc[t] += w * x[int64_t(t) * k + j];
      }
    }
  }
}

__global__ void MatvecKernel(const float* x, const char* w, uint64_t w_row_bytes, int dtype,
                             Scales scales, const float* bias, float* y, int tokens, int k, int n) {
  const int lane = threadIdx.x % kWarp;
  const int o = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (o >= n) return;  // the whole warp leaves; no block-wide sync follows
  const int t0 = blockIdx.y * kMatvecTokens;
  const int nt = min(kMatvecTokens, tokens - t0);
  float acc[kMatvecTokens] = {};
  LaneDots(w + w_row_bytes * o, dtype, ScaleRow(scales, o), scales.block_cols, x + int64_t(t0) * k,
           nt, k, acc);
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
  LaneDots(w_groups[g] + w_row_bytes * o, dtype, nullptr, 0, x + int64_t(m) * k, 1, k, acc);
  const float dot = WarpSum(acc[0]);
  if (lane == 0) y[int64_t(m) * n + o] = dot;
}

__global__ void DequantizeRowsKernel(const char* w, uint64_t w_row_bytes, int dtype, Scales scales,
                                     int rows, int k, float* out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(rows) * k) return;
  const int64_t r = i / k, j = i % k;
  const float v = WeightAt(w + w_row_bytes * r, dtype, int(j));
  out[i] = scales.grid ? __fmul_rn(v, ScaleRow(scales, int(r))[j / scales.block_cols]) : v;
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

__global__ void EmbeddingKernel(const char* table, uint64_t row_bytes, int dtype, Scales scales,
                                const int32_t* ids, int tokens, float* out, int h) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(tokens) * h) return;
  const int64_t t = i / h;
  const int j = int(i % h);
  const float v = WeightAt(table + row_bytes * uint64_t(ids[t]), dtype, j);
  out[i] = scales.grid ? __fmul_rn(v, ScaleRow(scales, ids[t])[j / scales.block_cols]) : v;
}

}  // namespace

void Matvec(const float* x, const char* w, uint64_t w_row_bytes, int dtype, const Scales& scales,
            const float* bias, float* y, int tokens, int k, int n, const Stream& s) {
  if (tokens == 0 || n == 0) return;
  const dim3 grid(Blocks(n, kRowsPerBlock), Blocks(tokens, kMatvecTokens));
  MatvecKernel<<<grid, kRowsPerBlock * kWarp, 0, s.stream>>>(x, w, w_row_bytes, dtype, scales, bias,
                                                             y, tokens, k, n);
  CheckLaunch(s, "Matvec");
}

void GroupedMatvec(const float* x, const char* const* w_groups, uint64_t w_row_bytes, int dtype,
                   const int32_t* offsets, int groups, float* y, int rows, int k, int n,
                   const Stream& s) {
  if (rows == 0 || n == 0) return;
  const dim3 grid(Blocks(n, kRowsPerBlock), unsigned(rows));
  GroupedMatvecKernel<<<grid, kRowsPerBlock * kWarp, 0, s.stream>>>(x, w_groups, w_row_bytes, dtype,
                                                             offsets, groups, y, k, n);
  CheckLaunch(s, "GroupedMatvec");
}

void DequantizeRows(const char* w, uint64_t w_row_bytes, int dtype, const Scales& scales, int rows,
                    int k, float* out, const Stream& s) {
  const int64_t n = int64_t(rows) * k;
  if (n == 0) return;
  DequantizeRowsKernel<<<Blocks(n, 256), 256, 0, s.stream>>>(w, w_row_bytes, dtype, scales, rows, k,
                                                             out);
  CheckLaunch(s, "DequantizeRows");
}

void AddBias(float* y, const float* bias, int tokens, int n, const Stream& s) {
  const int64_t total = int64_t(tokens) * n;
  if (total == 0) return;
  AddBiasKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(y, bias, tokens, n);
  CheckLaunch(s, "AddBias");
}

void HeadMatmul(const float* x, int x_stride, const float* w, float* y, int y_stride, int tokens,
                int n_h, int d_out, int d_in, const Stream& s) {
  const int64_t total = int64_t(tokens) * n_h * d_out;
  if (total == 0) return;
  HeadMatmulKernel<<<Blocks(total, 128), 128, 0, s.stream>>>(x, x_stride, w, y, y_stride, tokens, n_h,
                                                      d_out, d_in);
  CheckLaunch(s, "HeadMatmul");
}

void Embedding(const char* table, uint64_t row_bytes, int dtype, const Scales& scales,
               const int32_t* ids, int tokens, float* out, int h, const Stream& s) {
  const int64_t total = int64_t(tokens) * h;
  if (total == 0) return;
  EmbeddingKernel<<<Blocks(total, 256), 256, 0, s.stream>>>(table, row_bytes, dtype, scales, ids,
                                                            tokens, out, h);
  CheckLaunch(s, "Embedding");
}

}  // namespace anymoe::cuda::kernels
