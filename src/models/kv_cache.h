// The key/value cache of one sequence for standard (GQA) attention: per layer a
// K and a V tensor [capacity, n_kv, head_dim] f32, carved from one backend
// buffer allocated before the first token, so decoding never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

class KvCache {
 public:
  static Expected<std::unique_ptr<KvCache>> Create(Backend& backend, int64_t layers,
                                                   int64_t capacity, int64_t kv_heads,
                                                   int64_t k_dim, int64_t v_dim);

  // [capacity, kv_heads, dim] views of one layer.
  Tensor k(int64_t layer) const { return k_[size_t(layer)]; }
  Tensor v(int64_t layer) const { return v_[size_t(layer)]; }

  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  void Clear() { length_ = 0; }
  uint64_t bytes_per_token() const { return bytes_per_token_; }
  uint64_t bytes() const { return buffer_->size(); }

 private:
  KvCache() = default;
  std::unique_ptr<Buffer> buffer_;
  std::vector<Tensor> k_, v_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  uint64_t bytes_per_token_ = 0;
};

}  // namespace anymoe
