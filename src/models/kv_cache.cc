#include "models/kv_cache.h"

namespace anymoe {

Expected<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, int64_t layers,
                                                   int64_t capacity, int64_t kv_heads,
                                                   int64_t k_dim, int64_t v_dim) {
  std::unique_ptr<KvCache> c(new KvCache());
  c->capacity_ = capacity;
  const uint64_t k_bytes = uint64_t(capacity) * kv_heads * k_dim * sizeof(float);
  const uint64_t v_bytes = uint64_t(capacity) * kv_heads * v_dim * sizeof(float);
  c->bytes_per_token_ = uint64_t(layers) * kv_heads * (k_dim + v_dim) * sizeof(float);
  ASSIGN_OR_RETURN(c->buffer_,
                   backend.Allocate(uint64_t(layers) * (k_bytes + v_bytes), "KV cache"));
  for (int64_t l = 0; l < layers; ++l) {
    Tensor k = Tensor::Of(c->buffer_->base(), DType::kF32, {capacity, kv_heads, k_dim});
    k.offset = uint64_t(l) * (k_bytes + v_bytes);
    Tensor v = Tensor::Of(c->buffer_->base(), DType::kF32, {capacity, kv_heads, v_dim});
    v.offset = k.offset + k_bytes;
    c->k_.push_back(k);
    c->v_.push_back(v);
  }
  return c;
}

}  // namespace anymoe
