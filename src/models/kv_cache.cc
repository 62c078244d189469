#include "models/kv_cache.h"

#include <algorithm>

#include "core/quantize_row.h"

namespace anymoe {

Status CheckKvType(const Backend& backend, DType kv_type) {
  if (kv_type != DType::kF32 && kv_type != DType::kF16 && !IsRowQuantizable(kv_type)) {
    return Status::Error("--kv-type " + std::string(Name(kv_type)) +
                         ": use f32, f16, q8_0 or q4_0");
  }
  if (kv_type != DType::kF32 && backend.kind() != BackendKind::kCpu) {
    return Status::Error("--kv-type " + std::string(Name(kv_type)) +
                         " runs on the cpu backend only (" + backend.name() +
                         " keeps an f32 KV cache)");
  }
  return Status::Ok();
}

Status CheckKvLayers(DType kv_type, const std::vector<LayerCacheSpec>& layers) {
  if (!IsRowQuantizable(kv_type)) return Status::Ok();
  // The CPU attention kernel dequantises a block of keys of one head into a
  // tile of this many values per row (kernels::kMaxQuantizedHeadDim).
  constexpr int64_t kMaxHeadDim = 512;
  const int64_t block = Info(kv_type).block_elems;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCacheSpec& s = layers[i];
    if (s.kv_heads == 0) continue;  // MLA: the latent stays f32
    for (const int64_t dim : {s.k_dim, s.v_dim}) {
      if (dim % block != 0 || dim > kMaxHeadDim) {
        return Status::Error("--kv-type " + std::string(Name(kv_type)) + ": layer " +
                             std::to_string(i) + " has heads of " + std::to_string(dim) +
                             " values; " + std::string(Name(kv_type)) + " needs multiples of " +
                             std::to_string(block) + " up to " +
                             std::to_string(kMaxHeadDim) + " (use f16)");
      }
    }
  }
  return Status::Ok();
}

DType DefaultKvType(const Backend& backend) {
  return backend.kind() == BackendKind::kCpu ? DType::kF16 : DType::kF32;
}

Expected<std::unique_ptr<KvPool>> KvPool::Create(Backend& backend, int64_t num_blocks,
                                                 int64_t block_tokens,
                                                 const std::vector<LayerCacheSpec>& layers,
                                                 DType kv_type) {
  RETURN_IF_ERROR(CheckKvType(backend, kv_type));
  RETURN_IF_ERROR(CheckKvLayers(kv_type, layers));
  std::unique_ptr<KvPool> p(new KvPool());
  p->block_tokens_ = block_tokens;
  p->backend_ = &backend;
  for (const LayerCacheSpec& s : layers) {
    p->state_offsets_.push_back(p->state_floats_);
    p->state_floats_ += s.state_floats;
  }
  const int64_t rows = num_blocks * block_tokens;
  for (const LayerCacheSpec& s : layers) {
    p->bytes_per_token_ += BytesFor(kv_type, uint64_t(s.kv_heads * (s.k_dim + s.v_dim))).value() +
                           BytesFor(DType::kF32, uint64_t(s.latent_dim + s.index_dim)).value();
  }
  ASSIGN_OR_RETURN(p->buffer_, backend.Allocate(p->bytes_per_token_ * uint64_t(rows), "KV cache"));
  uint64_t offset = 0;
  auto carve = [&](DType type, std::initializer_list<int64_t> dims) {
    Tensor t = Tensor::Of(p->buffer_->base(), type, dims);
    t.offset = offset;
    offset += BytesFor(type, uint64_t(t.elements())).value();
    return t;
  };
  for (const LayerCacheSpec& s : layers) {
    Layer l;
    l.k = carve(kv_type, {rows, s.kv_heads, s.k_dim});
    l.v = carve(kv_type, {rows, s.kv_heads, s.v_dim});
    l.latent = carve(DType::kF32, {rows, s.latent_dim});
    l.index_keys = carve(DType::kF32, {rows, s.index_dim});
    p->layers_.push_back(l);
  }
  p->refs_.assign(size_t(num_blocks), 0);
  p->cached_.resize(size_t(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) p->free_.push_back(int32_t(b));
  return p;
}

int32_t KvPool::TakeBlock() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();  // evict the least recently freed cached block
    Unpublish(b);
  } else {
    return -1;
  }
  refs_[size_t(b)] = 1;
  ++used_;
  return b;
}

void KvPool::ReturnBlock(int32_t block) {
  CHECK(block >= 0 && block < num_blocks() && refs_[size_t(block)] > 0);
  if (--refs_[size_t(block)] > 0) return;
  --used_;
  Cached& c = cached_[size_t(block)];
  if (c.published) {
    c.lru = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

void KvPool::Unpublish(int32_t block) {
  Cached& c = cached_[size_t(block)];
  if (!c.published) return;
  lru_.erase(c.lru);
  by_hash_.erase(c.hash);
  c.published = false;
  c.tokens.clear();
}

void KvPool::DropCachedContent() {
  for (int32_t b : lru_) free_.push_back(b);
  lru_.clear();
  for (Cached& c : cached_) {
    c.published = false;
    c.tokens.clear();
  }
  by_hash_.clear();
}

void KvPool::Publish(int32_t block, uint64_t hash, std::span<const int32_t> tokens) {
  CHECK(block >= 0 && block < num_blocks() && refs_[size_t(block)] > 0);
  Cached& c = cached_[size_t(block)];
  if (c.published || by_hash_.count(hash) != 0) return;  // the first copy serves
  c.published = true;
  c.hash = hash;
  c.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, block);
}

int32_t KvPool::AcquireCached(uint64_t hash, std::span<const int32_t> tokens) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const int32_t b = it->second;
  Cached& c = cached_[size_t(b)];
  if (!std::equal(tokens.begin(), tokens.end(), c.tokens.begin(), c.tokens.end())) return -1;
  if (refs_[size_t(b)]++ == 0) {
    lru_.erase(c.lru);
    ++used_;
  }
  return b;
}

uint64_t PrefixBlockHash(uint64_t previous, std::span<const int32_t> block) {
  // splitmix64 steps over the previous hash and each token.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(previous ^ 0x5bd1e9955bd1e995ull);
  for (int32_t t : block) h = mix(h ^ uint64_t(uint32_t(t)));
  return h;
}

KvCache::KvCache(KvPool* pool, int64_t capacity, std::unique_ptr<KvPool> own_pool)
    : own_pool_(std::move(own_pool)), pool_(pool), capacity_(capacity) {
  const int64_t b = pool_->block_tokens();
  blocks_.reserve(size_t((capacity + b - 1) / b));
  rows_.reserve(blocks_.capacity() * size_t(b));
}

KvCache::~KvCache() { Release(); }

Tensor KvCache::state(int64_t i) const {
  CHECK(state_buffer_ != nullptr);
  const int64_t n = pool_->layers_.size() > size_t(i + 1) ? pool_->state_offsets_[size_t(i + 1)]
                                                          : pool_->state_floats_;
  Tensor t = Tensor::Of(state_buffer_->base(), DType::kF32, {n - pool_->state_offsets_[size_t(i)]});
  t.offset = uint64_t(pool_->state_offsets_[size_t(i)]) * sizeof(float);
  return t;
}

Status KvCache::CheckpointState() {
  if (state_buffer_ == nullptr) return Status::Error("recurrent state checkpoint: no state yet");
  if (checkpoint_buffer_ == nullptr) {
    ASSIGN_OR_RETURN(checkpoint_buffer_,
                     pool_->backend_->Allocate(pool_->state_bytes_per_sequence(),
                                               "recurrent state checkpoint"));
  }
  const Tensor state = Tensor::Of(state_buffer_->base(), DType::kF32, {pool_->state_floats_});
  pool_->backend_->Copy(state,
                        Tensor::Of(checkpoint_buffer_->base(), DType::kF32, {pool_->state_floats_}));
  checkpoint_tokens_ = state_tokens_;
  return Status::Ok();
}

bool KvCache::RestoreState() {
  if (checkpoint_buffer_ == nullptr || checkpoint_tokens_ < 0) return false;
  pool_->backend_->Copy(Tensor::Of(checkpoint_buffer_->base(), DType::kF32, {pool_->state_floats_}),
                        Tensor::Of(state_buffer_->base(), DType::kF32, {pool_->state_floats_}));
  state_tokens_ = checkpoint_tokens_;
  checkpoint_tokens_ = -1;
  return true;
}

Status KvCache::Reserve(int64_t tokens) {
  if (tokens > capacity_) {
    return Status::Error("context full: " + std::to_string(tokens) +
                         " tokens exceed the context of " + std::to_string(capacity_));
  }
  if (pool_->state_floats_ > 0 && state_buffer_ == nullptr) {
    ASSIGN_OR_RETURN(state_buffer_, pool_->backend_->Allocate(pool_->state_bytes_per_sequence(),
                                                              "recurrent state"));
    pool_->backend_->Zero(Tensor::Of(state_buffer_->base(), DType::kF32, {pool_->state_floats_}));
    state_tokens_ = 0;
  }
  const int64_t b = pool_->block_tokens();
  const int64_t need = (tokens + b - 1) / b - int64_t(blocks_.size());
  if (need <= 0) return Status::Ok();
  if (pool_->num_blocks() - pool_->used_blocks() < need) {
    return Status::Error("KV cache full: " + std::to_string(need) + " more blocks of " +
                         std::to_string(b) + " tokens needed, " +
                         std::to_string(pool_->num_blocks() - pool_->used_blocks()) + " free");
  }
  for (int64_t i = 0; i < need; ++i) {
    const int32_t block = pool_->TakeBlock();
    blocks_.push_back(block);
    for (int64_t r = 0; r < b; ++r) rows_.push_back(int32_t(block * b + r));
  }
  return Status::Ok();
}

void KvCache::Adopt(std::span<const int32_t> blocks) {
  CHECK(blocks_.empty());
  const int64_t b = pool_->block_tokens();
  for (int32_t block : blocks) {
    blocks_.push_back(block);
    for (int64_t r = 0; r < b; ++r) rows_.push_back(int32_t(block * b + r));
  }
  length_ = int64_t(blocks.size()) * b;
}

Status KvCache::Mirror(std::span<const int32_t> blocks, int64_t length) {
  CHECK(blocks_.empty() || mirrored_);
  const int64_t b = pool_->block_tokens();
  for (int32_t block : blocks) {
    if (block < 0 || block >= pool_->num_blocks()) {
      return Status::Error("KV block " + std::to_string(block) + " is outside the pool of " +
                           std::to_string(pool_->num_blocks()) + " blocks");
    }
  }
  if (length < 0 || length > int64_t(blocks.size()) * b || length > capacity_) {
    return Status::Error("KV length " + std::to_string(length) + " does not fit " +
                         std::to_string(blocks.size()) + " blocks (capacity " +
                         std::to_string(capacity_) + ")");
  }
  mirrored_ = true;
  blocks_.assign(blocks.begin(), blocks.end());
  rows_.clear();
  for (int32_t block : blocks) {
    for (int64_t r = 0; r < b; ++r) rows_.push_back(int32_t(block * b + r));
  }
  length_ = length;
  return Status::Ok();
}

void KvCache::Release() {
  if (!mirrored_) {
    for (int32_t block : blocks_) pool_->ReturnBlock(block);
  }
  blocks_.clear();
  rows_.clear();
  length_ = 0;
  state_tokens_ = 0;  // the model zeroes the state when the next sequence starts
  checkpoint_tokens_ = -1;
  mirrored_ = false;
}

}  // namespace anymoe
