#include "models/kv_cache.h"

namespace anymoe {

Status CheckKvType(const Backend& backend, DType kv_type) {
  if (kv_type != DType::kF32 && kv_type != DType::kF16) {
    return Status::Error("--kv-type " + std::string(Name(kv_type)) + ": use f32 or f16");
  }
  if (kv_type == DType::kF16 && backend.kind() != BackendKind::kCpu) {
    return Status::Error("--kv-type f16 runs on the cpu backend only (" + backend.name() +
                         " keeps an f32 KV cache)");
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
  std::unique_ptr<KvPool> p(new KvPool());
  p->block_tokens_ = block_tokens;
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
  p->block_used_.assign(size_t(num_blocks), false);
  for (int64_t b = num_blocks - 1; b >= 0; --b) p->free_.push_back(int32_t(b));
  return p;
}

int32_t KvPool::TakeBlock() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  block_used_[size_t(b)] = true;
  ++used_;
  return b;
}

void KvPool::ReturnBlock(int32_t block) {
  CHECK(block >= 0 && block < num_blocks() && block_used_[size_t(block)]);
  block_used_[size_t(block)] = false;
  free_.push_back(block);
  --used_;
}

KvCache::KvCache(KvPool* pool, int64_t capacity, std::unique_ptr<KvPool> own_pool)
    : own_pool_(std::move(own_pool)), pool_(pool), capacity_(capacity) {
  const int64_t b = pool_->block_tokens();
  blocks_.reserve(size_t((capacity + b - 1) / b));
  rows_.reserve(blocks_.capacity() * size_t(b));
}

KvCache::~KvCache() { Release(); }

Status KvCache::Reserve(int64_t tokens) {
  if (tokens > capacity_) {
    return Status::Error("context full: " + std::to_string(tokens) +
                         " tokens exceed the context of " + std::to_string(capacity_));
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

void KvCache::Release() {
  for (int32_t block : blocks_) pool_->ReturnBlock(block);
  blocks_.clear();
  rows_.clear();
  length_ = 0;
}

}  // namespace anymoe
