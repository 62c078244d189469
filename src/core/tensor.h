// Tensor: a typed view of backend memory, up to 4 dims, outer-first, with the
// last dimension contiguous. It owns nothing; arenas and model files own bytes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/check.h"
#include "core/dtype.h"

namespace anymoe {

// Where the f32 inverse scales of an FP8 weight are (block-quantised
// checkpoints): one per block of `rows` x `cols` elements, row-major
// [ceil(R / rows), ceil(C / cols)] over the whole matrix; element (r, c) is
// value * scale[r / rows][c / cols]. Null `data` when the weight has none.
struct BlockScales {
  // f32 with no alignment promise (safetensors); on a device, the handle of
  // the buffer holding the grid.
  const void* data = nullptr;
  int32_t rows = 0, cols = 0;
  // The grid starts grid_offset bytes into `data` (a device expert cache keeps
  // an expert's grid in its slot), and the matrix it describes starts
  // matrix_offset bytes into the weight's `base` (0: `base` is its row 0).
  uint64_t grid_offset = 0, matrix_offset = 0;
  explicit operator bool() const { return data != nullptr; }
  // The grid's columns, and its bytes, for a matrix of that many rows and columns.
  int64_t GridCols(int64_t matrix_cols) const { return (matrix_cols + cols - 1) / cols; }
  uint64_t GridBytes(int64_t matrix_rows, int64_t matrix_cols) const {
    return uint64_t((matrix_rows + rows - 1) / rows) * uint64_t(GridCols(matrix_cols)) *
           sizeof(float);
  }
};

struct Tensor {
  // Backend memory handle: a host pointer on the CPU (and a device pointer on
  // CUDA); `offset` is in bytes from it, so handle-based APIs (OpenCL) work too.
  void* base = nullptr;
  uint64_t offset = 0;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, 4> shape{};
  // CPU weights only: the same matrix also stored as 8-row panels
  // (backends/cpu/kernels/panel_layout.h), read at `panels` + offset; null when
  // not. A row slice keeps it (its byte offset is the same in both layouts); a
  // view with other columns drops it.
  const void* panels = nullptr;
  // FP8 weights: their block scales. A row slice finds its block row from
  // (offset - scales.matrix_offset) / row_bytes().
  BlockScales scales;

  static Tensor Of(void* base, DType dtype, std::initializer_list<int64_t> dims) {
    Tensor t;
    t.base = base;
    t.dtype = dtype;
    for (int64_t d : dims) t.shape[t.rank++] = d;
    return t;
  }

  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  int64_t cols() const { return rank == 0 ? 1 : shape[rank - 1]; }
  int64_t rows() const {
    int64_t r = 1;
    for (int i = 0; i + 1 < rank; ++i) r *= shape[i];
    return r;
  }
  int64_t elements() const { return rows() * cols(); }
  uint64_t row_bytes() const { return BytesFor(dtype, uint64_t(cols())).value(); }

  // Host address (CPU backend only).
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
  }

  // View of rows [begin, begin + n) of the 2-D interpretation [rows, cols].
  Tensor RowSlice(int64_t begin, int64_t n) const {
    CHECK(begin >= 0 && n >= 0 && begin + n <= rows());
    Tensor t = *this;
    t.offset += uint64_t(begin) * row_bytes();
    t.rank = 2;
    t.shape = {n, cols(), 0, 0};
    return t;
  }

  // The first rows * cols elements of this (contiguous) tensor as [rows, cols].
  Tensor Prefix(int64_t rows, int64_t cols) const {
    CHECK(rows * cols <= elements());
    Tensor t = *this;
    t.rank = 2;
    t.shape = {rows, cols, 0, 0};
    if (cols != this->cols()) t.panels = nullptr;
    CHECK(!scales || cols == this->cols());
    return t;
  }

  // Same bytes, new shape (element count must match).
  Tensor Reshaped(std::initializer_list<int64_t> dims) const {
    Tensor t = *this;
    t.rank = 0;
    for (int64_t d : dims) t.shape[t.rank++] = d;
    CHECK(t.elements() == elements());
    if (t.cols() != cols()) t.panels = nullptr;
    CHECK(!scales || t.cols() == cols());
    return t;
  }
};

// dst [n, cols] (rows first .. first + n of a matrix) times their block
// scales from `grid` (that matrix's grid in host memory, f32 with no
// alignment promise; blocks of s.rows x s.cols, s's data and offsets unread).
void ApplyBlockScales(const uint8_t* grid, const BlockScales& s, int64_t first, int64_t n,
                      int64_t cols, float* dst);

// Rows [r0, r0 + n) of the 2-D view of `w` (any dtype, in host memory) as f32
// into `dst` ([n, cols]), with FP8 block scales applied: the one way weight
// rows are widened, so every path gives the same bits.
void DequantizeWeightRows(const Tensor& w, int64_t r0, int64_t n, float* dst);

}  // namespace anymoe
