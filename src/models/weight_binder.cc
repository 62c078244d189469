#include "models/weight_binder.h"

#include <vector>

namespace anymoe {

Expected<std::optional<Tensor>> WeightBinder::Optional(const std::string& name,
                                                       std::initializer_list<int64_t> shape) {
  const TensorInfo* info = source_.Find(name);
  if (info == nullptr) return std::optional<Tensor>();
  const std::vector<int64_t> want(shape);
  if (info->shape != want) {
    return Status::Error(source_.description() + ": tensor '" + name + "' has shape " +
                         ShapeString(info->shape) + ", expected " + ShapeString(want));
  }
  ASSIGN_OR_RETURN(Tensor t, backend_.PrepareWeight(*info));
  bound_bytes_ += info->bytes;
  return std::optional<Tensor>(t);
}

Expected<Tensor> WeightBinder::Require(const std::string& name,
                                       std::initializer_list<int64_t> shape) {
  ASSIGN_OR_RETURN(auto t, Optional(name, shape));
  if (!t) return Status::Error(source_.description() + ": missing tensor '" + name + "'");
  return *t;
}

}  // namespace anymoe
