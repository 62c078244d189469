// Widening weight rows to f32, FP8 block scales included.
#include "core/tensor.h"

#include <algorithm>
#include <cstring>

// The reference multiplies each widened value by its scale once, in f32.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace anymoe {

void DequantizeWeightRows(const Tensor& w, int64_t r0, int64_t n, float* dst) {
  const int64_t cols = w.cols();
  const uint64_t row_bytes = w.row_bytes();
  CHECK(r0 >= 0 && n >= 0 && r0 + n <= w.rows());
  const uint8_t* rows = w.as<const uint8_t>() + uint64_t(r0) * row_bytes;
  for (int64_t r = 0; r < n; ++r) DequantizeRow(w.dtype, rows + r * row_bytes, dst + r * cols, cols);
  if (!w.scales) return;
  const BlockScales& s = w.scales;
  CHECK(w.offset >= s.matrix_offset && (w.offset - s.matrix_offset) % row_bytes == 0);
  // The row within the whole matrix.
  const int64_t first = int64_t((w.offset - s.matrix_offset) / row_bytes) + r0;
  ApplyBlockScales(static_cast<const uint8_t*>(s.data) + s.grid_offset, s, first, n, cols, dst);
}

void ApplyBlockScales(const uint8_t* grid, const BlockScales& s, int64_t first, int64_t n,
                      int64_t cols, float* dst) {
  CHECK(s.rows > 0 && s.cols > 0);
  const int64_t grid_cols = s.GridCols(cols);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* scale_row = grid + uint64_t((first + r) / s.rows * grid_cols) * sizeof(float);
    float* out = dst + r * cols;
    for (int64_t b = 0; b < grid_cols; ++b) {
      float scale;
      std::memcpy(&scale, scale_row + b * sizeof(float), sizeof(float));
      const int64_t c1 = std::min<int64_t>(cols, (b + 1) * s.cols);
      for (int64_t c = b * s.cols; c < c1; ++c) out[c] = out[c] * scale;
    }
  }
}

}  // namespace anymoe
