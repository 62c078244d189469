#include "models/kv_cache.h"

namespace anymoe {

Expected<std::unique_ptr<KvCache>> KvCache::Create(Backend& backend, int64_t capacity,
                                                   const std::vector<LayerCacheSpec>& layers) {
  std::unique_ptr<KvCache> c(new KvCache());
  c->capacity_ = capacity;
  int64_t floats_per_token = 0;
  for (const LayerCacheSpec& s : layers) floats_per_token += s.floats_per_token();
  c->bytes_per_token_ = uint64_t(floats_per_token) * sizeof(float);
  ASSIGN_OR_RETURN(c->buffer_,
                   backend.Allocate(c->bytes_per_token_ * uint64_t(capacity), "KV cache"));
  uint64_t offset = 0;
  auto carve = [&](std::initializer_list<int64_t> dims) {
    Tensor t = Tensor::Of(c->buffer_->base(), DType::kF32, dims);
    t.offset = offset;
    offset += uint64_t(t.elements()) * sizeof(float);
    return t;
  };
  for (const LayerCacheSpec& s : layers) {
    Layer l;
    l.k = carve({capacity, s.kv_heads, s.k_dim});
    l.v = carve({capacity, s.kv_heads, s.v_dim});
    l.latent = carve({capacity, s.latent_dim});
    l.index_keys = carve({capacity, s.index_dim});
    c->layers_.push_back(l);
  }
  return c;
}

}  // namespace anymoe
