// The format-neutral view of a model file's tensors: name, dtype, shape and a
// pointer into the mmap. GGUF and safetensors readers both produce it, so model
// code binds weights the same way whatever the file format.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace anymoe {

struct TensorInfo {
  std::string name;
  DType dtype;
  // Outer-first (numpy / PyTorch order): a Linear weight is [out, in], and the
  // last dimension is contiguous. GGUF's ne[] is reversed into this order.
  std::vector<int64_t> shape;
  const uint8_t* data;  // into the mapped file; valid while the source lives
  uint64_t bytes;       // validated: data + bytes lies inside the file
  // FP8 weights of a block-quantised checkpoint: their validated `_scale_inv`
  // (formats/fp8_scales.h); empty otherwise.
  BlockScales scales{};

  int64_t rows() const;  // product of all dims but the last (1 for a vector)
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  int64_t elements() const;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // nullptr when absent.
  virtual const TensorInfo* Find(std::string_view name) const = 0;
  virtual std::span<const TensorInfo> tensors() const = 0;
  // File path(s) for error messages.
  virtual std::string description() const = 0;
};

std::string ShapeString(const std::vector<int64_t>& shape);  // "[4096, 512]"

}  // namespace anymoe
