// A file tensor as every backend's ops read it, still in host memory: the
// file's shape and dtype, except that rank-1 tensors (norm weights, biases) of
// any dtype become f32, because ops read vectors as f32. A backend then keeps
// the bytes (the CPU: a view of the mmap) or uploads them (devices).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "core/status.h"
#include "core/dtype.h"
#include "formats/tensor_source.h"

namespace anymoe {

struct HostWeight {
  Tensor tensor;                 // shape and dtype; base = the host bytes
  uint64_t bytes = 0;
  std::vector<float> converted;  // the f32 copy tensor.base points into, when converted

  bool was_converted() const { return !converted.empty(); }
};

// Errors on ranks other than 1-4 (naming the tensor).
Expected<HostWeight> PrepareHostWeight(const TensorInfo& info);

}  // namespace anymoe
