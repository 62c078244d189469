// Contract checks that the CPU backend and the shared device layer make
// alike, for ops whose arguments every backend validates the same way.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace anymoe {

// IndexerTopK: q [T, n_I, d_I], pool [R, d_I], head weights [T, n_I], key
// rows for every position up to n_past + T, selection [T, topk], counts [T].
inline void CheckIndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                             std::span<const int32_t> key_rows, int64_t n_past, int64_t topk,
                             std::span<const int32_t> selection, std::span<const int32_t> counts) {
  CHECK(q.rank == 3 && pool.rank == 2);
  const int64_t t = q.dim(0);
  CHECK(pool.cols() == q.dim(2) && head_weights.cols() == q.dim(1) &&
        n_past + t <= int64_t(key_rows.size()));
  CHECK(selection.size() == size_t(t * topk) && counts.size() == size_t(t));
}

// HeadMatmul: w [n_h, d_out, d_in] f32, x and y T x n_h slots of x_stride
// and y_stride floats; returns T.
inline int64_t CheckHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w,
                               const Tensor& y, int64_t y_stride) {
  CHECK(w.rank == 3 && w.dtype == DType::kF32);
  const int64_t n_h = w.dim(0), d_out = w.dim(1), d_in = w.dim(2);
  CHECK(x_stride >= d_in && y_stride >= d_out && x.elements() % (n_h * x_stride) == 0);
  const int64_t t = x.elements() / (n_h * x_stride);
  CHECK(y.elements() == t * n_h * y_stride);
  return t;
}

}  // namespace anymoe
