#include "models/workspace.h"

namespace anymoe {

Status Workspace::Allocate(Backend& backend, uint64_t floats) {
  ASSIGN_OR_RETURN(buffer_, backend.Allocate(floats * sizeof(float), "activations"));
  capacity_ = floats;
  used_ = 0;
  return Status::Ok();
}

Tensor Workspace::Take(int64_t rows, int64_t cols) {
  const uint64_t n = Footprint(rows, cols);
  CHECK(used_ + n <= capacity_);
  Tensor t = Tensor::Of(buffer_->base(), DType::kF32, {rows, cols});
  t.offset = used_ * sizeof(float);
  used_ += n;
  return t;
}

}  // namespace anymoe
