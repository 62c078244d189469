#include "backends/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <array>

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

// f16/bf16 kernels keep x in f32, so they are exact whatever `exact` says.
bool UseIntegerKernels(bool exact, DType w, int64_t t, int64_t in) {
  if (!kernels::IsQuantMatmulSupported(w) || in % Info(w).block_elems != 0) return false;
  return t <= kMaxQuantRows && (!exact || w == DType::kF16 || w == DType::kBF16);
}

void Matmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t floats)> shared,
            bool exact, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), in = x.cols(), out = w.rows();
  CHECK(w.cols() == in && y.rows() == t && y.cols() == out);
  CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
  if (UseIntegerKernels(exact, w.dtype, t, in)) {
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

void GroupedMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                   bool exact, const Tensor& x, std::span<const Tensor> weights,
                   std::span<const int32_t> offsets, const Tensor& y) {
  const int64_t groups = int64_t(weights.size()), in = x.cols(), out = y.cols();
  CHECK(offsets.size() == weights.size() + 1 && y.rows() == x.rows());
  const DType dtype = groups > 0 ? weights[0].dtype : DType::kF32;
  int64_t max_rows = 0;
  bool same_dtype = true;
  for (int64_t g = 0; g < groups; ++g) {
    same_dtype &= weights[size_t(g)].dtype == dtype;
    max_rows = std::max<int64_t>(max_rows, offsets[size_t(g) + 1] - offsets[size_t(g)]);
  }
  if (!same_dtype || !UseIntegerKernels(exact, dtype, max_rows, in)) {  // one matmul per group
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
      if (n > 0) {
        Matmul(pool, scratch, shared, exact, x.RowSlice(r0, n), weights[size_t(g)], nullptr,
               y.RowSlice(r0, n));
      }
    }
    return;
  }
  // Quantise every group's rows into its own slice of the shared buffer, then
  // run all (group, row tile) pairs in a single parallel region.
  auto slice_floats = [&](int64_t rows) {
    return (kernels::QuantizedActivationBytes(dtype, rows, in) + 63) / 64 * 16;
  };
  uint64_t total = 0;
  for (int64_t g = 0; g < groups; ++g) total += slice_floats(offsets[size_t(g) + 1] - offsets[size_t(g)]);
  float* buffer = shared(total);
  constexpr int64_t kTile = 64;
  const int64_t tiles_per_group = (out + kTile - 1) / kTile;
  uint64_t offset = 0;
  // task -> (group, tile): groups with rows, in order.
  std::array<int32_t, 1024> active_groups{};
  std::array<uint64_t, 1024> group_offset{};
  int64_t n_active = 0;
  CHECK(groups <= 1024);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
    if (n == 0) continue;
    kernels::QuantizeActivations(dtype, x.as<const float>() + r0 * in, n, in, buffer + offset);
    active_groups[size_t(n_active)] = int32_t(g);
    group_offset[size_t(n_active)] = offset;
    ++n_active;
    offset += slice_floats(n);
  }
  pool.ParallelFor(n_active * tiles_per_group, [&](int64_t task, int) {
    const int64_t a = task / tiles_per_group, tile = task % tiles_per_group;
    const int64_t g = active_groups[size_t(a)];
    const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
    const Tensor& w = weights[size_t(g)];
    const int64_t n0 = tile * kTile, n1 = std::min(out, n0 + kTile);
    kernels::QuantMatmulRows(dtype, w.as<const uint8_t>(), w.row_bytes(),
                             buffer + group_offset[size_t(a)], n, in, n0, n1,
                             y.as<float>() + r0 * out, out);
  });
}

}  // namespace anymoe::cpu
