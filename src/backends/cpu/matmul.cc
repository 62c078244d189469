#include "backends/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>

namespace anymoe::cpu {
namespace {

// Rows of W per task: enough to amortise a BLAS call, few enough to balance 2+ threads.
constexpr int64_t kTileRows = 32;

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

void Matmul(ThreadPool& pool, ScratchFn scratch, const Tensor& x, const Tensor& w,
            const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), in = x.cols(), out = w.rows();
  CHECK(w.cols() == in && y.rows() == t && y.cols() == out);
  CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
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

  if (bias != nullptr) {
    const float* b = bias->as<const float>();
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < out; ++j) yp[i * out + j] += b[j];
    }
  }
}

}  // namespace anymoe::cpu
