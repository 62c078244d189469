#include "runtime/routing_trace.h"

#include <algorithm>

#include "core/npy.h"

namespace anymoe {

RoutingTrace::RoutingTrace() {
  observer_.on_route = [this](int64_t layer, std::span<const int32_t> ids, int64_t k) {
    auto it = std::find(layers_.begin(), layers_.end(), layer);
    if (it == layers_.end()) {
      layers_.push_back(layer);
      ids_.emplace_back();
      it = layers_.end() - 1;
    }
    k_ = k;
    auto& v = ids_[size_t(it - layers_.begin())];
    v.insert(v.end(), ids.begin(), ids.end());
  };
}

int64_t RoutingTrace::tokens() const {
  return ids_.empty() || k_ == 0 ? 0 : int64_t(ids_[0].size()) / k_;
}

Status RoutingTrace::Write(const std::string& path) const {
  const int64_t t = tokens(), l = int64_t(layers_.size());
  std::vector<int32_t> out(size_t(t * l * k_));
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < l; ++j) {
      std::copy_n(ids_[size_t(j)].begin() + i * k_, k_, out.begin() + (i * l + j) * k_);
    }
  }
  const int64_t shape[3] = {t, l, k_};
  return WriteNpy(path, NpyDType::kI32, shape, out.data());
}

}  // namespace anymoe
