// Scratch activations for one forward step, carved from a single backend
// buffer allocated at load. Each block takes what it needs and the model resets
// the arena between blocks, so the buffer is sized by the hungriest block.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/backend.h"

namespace anymoe {

class Workspace {
 public:
  Status Allocate(Backend& backend, uint64_t floats);
  void Reset() { used_ = 0; }
  // An f32 [rows, cols] tensor; aborts if the load-time plan was too small (a bug).
  Tensor Take(int64_t rows, int64_t cols);
  uint64_t bytes() const { return capacity_ * sizeof(float); }

  // Floats `Take(rows, cols)` consumes, for planning.
  static uint64_t Footprint(int64_t rows, int64_t cols) {
    return (uint64_t(rows * cols) + 15) / 16 * 16;
  }

 private:
  std::unique_ptr<Buffer> buffer_;
  uint64_t capacity_ = 0;  // floats
  uint64_t used_ = 0;
};

}  // namespace anymoe
