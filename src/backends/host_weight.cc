#include "backends/host_weight.h"

#include <algorithm>
#include <string>

namespace anymoe {

Expected<HostWeight> PrepareHostWeight(const TensorInfo& info) {
  if (info.shape.empty() || info.shape.size() > 4) {
    return Status::Error("tensor '" + info.name + "': unsupported rank " +
                         std::to_string(info.shape.size()));
  }
  HostWeight w;
  Tensor& t = w.tensor;
  t.base = const_cast<uint8_t*>(info.data);
  t.dtype = info.dtype;
  t.rank = int(info.shape.size());
  std::copy(info.shape.begin(), info.shape.end(), t.shape.begin());
  w.bytes = info.bytes;
  t.scales = info.scales;
  if (t.rank == 1 && t.dtype != DType::kF32) {
    w.converted.resize(size_t(t.elements()));
    DequantizeRow(t.dtype, info.data, w.converted.data(), t.elements());
    t.base = w.converted.data();
    t.dtype = DType::kF32;
    w.bytes = w.converted.size() * sizeof(float);
  }
  return w;
}

}  // namespace anymoe
