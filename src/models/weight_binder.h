// Looks up a model's weights by name in its file and makes them usable by the
// backend, checking each shape against what the config implies. Every model
// architecture binds its weights through this one place.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "formats/tensor_source.h"

namespace anymoe {

class WeightBinder {
 public:
  WeightBinder(const TensorSource& source, Backend& backend)
      : source_(source), backend_(backend) {}

  // The tensor `name` with exactly `shape` (outer-first); a clear error if it is
  // missing or shaped differently.
  Expected<Tensor> Require(const std::string& name, std::initializer_list<int64_t> shape);
  // Like Require, but absence is not an error.
  Expected<std::optional<Tensor>> Optional(const std::string& name,
                                           std::initializer_list<int64_t> shape);

  uint64_t bound_bytes() const { return bound_bytes_; }

 private:
  const TensorSource& source_;
  Backend& backend_;
  uint64_t bound_bytes_ = 0;
};

}  // namespace anymoe
