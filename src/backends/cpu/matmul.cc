#include "backends/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>

#include "backends/cpu/kernels/quant_matmul.h"

namespace anymoe::cpu {
namespace {

// Rows of W per task: enough to amortise a BLAS call, few enough to balance 2+ threads.
constexpr int64_t kTileRows = 32;
// Up to this many activation rows the integer kernels beat dequantise + GEMM.
constexpr int64_t kMaxQuantRows = 32;

void AddBias(const Tensor* bias, int64_t t, int64_t out, float* y) {
  if (bias == nullptr) return;
  const float* b = bias->as<const float>();
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < out; ++j) y[i * out + j] += b[j];
  }
}

// Integer (or widening) kernels straight from the weight blocks.
void QuantMatmul(ThreadPool& pool, FunctionRef<float*(uint64_t)> shared, const Tensor& x,
                 const Tensor& w, float* y) {
  const int64_t t = x.rows(), in = x.cols(), out = w.rows();
  const size_t bytes = kernels::QuantizedActivationBytes(w.dtype, t, in);
  void* qx = shared((bytes + sizeof(float) - 1) / sizeof(float));
  kernels::QuantizeActivations(w.dtype, x.as<const float>(), t, in, qx);
  const auto* wp = w.as<const uint8_t>();
  const size_t row_bytes = w.row_bytes();
  // Tiles small enough to keep both cores busy on short matrices.
  const int64_t tile = std::clamp<int64_t>(out / (8 * pool.num_threads()), 8, 256);
  pool.ParallelFor((out + tile - 1) / tile, [&](int64_t i, int) {
    const int64_t n0 = i * tile, n1 = std::min(out, n0 + tile);
    kernels::QuantMatmulRows(w.dtype, wp, row_bytes, qx, t, in, n0, n1, y, out);
  });
}

// y[:, n0:n0+n] = x . Wtile^T where Wtile is [n, in] f32 with row stride `in`.
void MultiplyTile(const float* x, int64_t t, int64_t in, const float* w_tile, int64_t n,
                  float* y, int64_t y_stride) {
  if (t == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(in), 1.0f, w_tile, int(in), x, 1, 0.0f,
                y, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(t), int(n), int(in), 1.0f, x,
                int(in), w_tile, int(in), 0.0f, y, int(y_stride));
  }
}

}  // namespace

void Matmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t floats)> shared,
            const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), in = x.cols(), out = w.rows();
  CHECK(w.cols() == in && y.rows() == t && y.cols() == out);
  CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
  if (t <= kMaxQuantRows && kernels::IsQuantMatmulSupported(w.dtype) &&
      in % Info(w.dtype).block_elems == 0) {
    QuantMatmul(pool, shared, x, w, y.as<float>());
    AddBias(bias, t, out, y.as<float>());
    return;
  }
  const float* xp = x.as<const float>();
  float* yp = y.as<float>();
  const auto* wp = w.as<const uint8_t>();
  const uint64_t w_row_bytes = w.row_bytes();
  const int64_t tiles = (out + kTileRows - 1) / kTileRows;

  pool.ParallelFor(tiles, [&](int64_t tile, int thread) {
    const int64_t r0 = tile * kTileRows;
    const int64_t n = std::min(kTileRows, out - r0);
    const float* w_tile;
    if (w.dtype == DType::kF32) {
      w_tile = reinterpret_cast<const float*>(wp + r0 * w_row_bytes);
    } else {
      float* buf = scratch(thread, uint64_t(n * in));
      for (int64_t r = 0; r < n; ++r) {
        DequantizeRow(w.dtype, wp + (r0 + r) * w_row_bytes, buf + r * in, in);
      }
      w_tile = buf;
    }
    MultiplyTile(xp, t, in, w_tile, n, yp + r0, out);
  });

  AddBias(bias, t, out, yp);
}

}  // namespace anymoe::cpu
