// The attention cache of one sequence, per layer whatever its attention kind:
// K and V [capacity, n_kv, head_dim] for GQA; the latent [capacity, kv_lora +
// rope] for MLA (the compressed kv and the rotated rope key, not full K/V); and
// the DSA indexer's keys [capacity, index_head_dim]. One backend buffer,
// allocated before the first token, so decoding never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

// Floats per token of each cache tensor of one layer (0: none).
struct LayerCacheSpec {
  int64_t kv_heads = 0, k_dim = 0, v_dim = 0;  // GQA
  int64_t latent_dim = 0;                      // MLA
  int64_t index_dim = 0;                       // DSA indexer keys
  int64_t floats_per_token() const { return kv_heads * (k_dim + v_dim) + latent_dim + index_dim; }
};

class KvCache {
 public:
  static Expected<std::unique_ptr<KvCache>> Create(Backend& backend, int64_t capacity,
                                                   const std::vector<LayerCacheSpec>& layers);

  struct Layer {
    Tensor k, v;        // [capacity, kv_heads, dim]
    Tensor latent;      // [capacity, latent_dim]
    Tensor index_keys;  // [capacity, index_dim]
  };
  const Layer& layer(int64_t i) const { return layers_[size_t(i)]; }

  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  void Clear() { length_ = 0; }
  uint64_t bytes_per_token() const { return bytes_per_token_; }
  uint64_t bytes() const { return buffer_->size(); }

 private:
  KvCache() = default;
  std::unique_ptr<Buffer> buffer_;
  std::vector<Layer> layers_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  uint64_t bytes_per_token_ = 0;
};

}  // namespace anymoe
