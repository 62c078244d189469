// The attention cache, paged. A KvPool holds fixed-size blocks of token rows
// for every layer: K and V [rows, n_kv, head_dim] for GQA; the latent
// [rows, kv_lora + rope] for MLA (the compressed kv and the rotated rope key,
// not per-head K/V); the DSA indexer's keys [rows, index_head_dim]. A KvCache is
// one sequence: a block table mapping its positions to pool rows. Blocks are
// taken as the sequence grows and returned when it ends; the pool's memory is
// allocated once, so decoding never allocates device memory.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

// Values per token of each cache tensor of one layer (0: none).
struct LayerCacheSpec {
  int64_t kv_heads = 0, k_dim = 0, v_dim = 0;  // GQA
  int64_t latent_dim = 0;                      // MLA
  int64_t index_dim = 0;                       // DSA indexer keys
  // f32 values of fixed per-sequence state, whatever its length: GLM-5.3's
  // KDA conv rows and recurrent state. Not paged: each KvCache holds its own.
  int64_t state_floats = 0;
};

// Whether `backend` keeps a KV cache of `kv_type`: f32 everywhere, f16, q8_0
// and q4_0 on the CPU backend only (device backends refuse them); the error
// names --kv-type.
Status CheckKvType(const Backend& backend, DType kv_type);

// Whether every GQA layer's heads fit `kv_type`'s blocks: q8_0 and q4_0 need
// head dims that are multiples of 32 (and at most 512); MLA layers keep an f32
// latent whatever the type.
Status CheckKvLayers(DType kv_type, const std::vector<LayerCacheSpec>& layers);

// The KV type a backend gets unless one is asked for: f16 on the cpu backend
// (as llama.cpp defaults to: half the memory, and decode attention there is
// bound by the bytes it reads), f32 on the device backends, which keep no f16
// cache.
DType DefaultKvType(const Backend& backend);

class KvPool {
 public:
  static constexpr int64_t kDefaultBlockTokens = 16;

  // `kv_type`: element type of the GQA keys and values, f32, f16 (half the
  // memory and the bytes attention reads; each value rounded to the nearest
  // f16 when written), or q8_0 / q4_0 (each new row quantised into GGUF blocks
  // of 32 as ggml's reference quantiser does; attention reads the values they
  // stand for). MLA latents and DSA indexer keys are f32 whatever the type.
  static Expected<std::unique_ptr<KvPool>> Create(Backend& backend, int64_t num_blocks,
                                                  int64_t block_tokens,
                                                  const std::vector<LayerCacheSpec>& layers,
                                                  DType kv_type = DType::kF32);

  struct Layer {
    Tensor k, v;        // [rows, kv_heads, dim], f32 or f16
    Tensor latent;      // [rows, latent_dim]
    Tensor index_keys;  // [rows, index_dim]
  };
  const Layer& layer(int64_t i) const { return layers_[size_t(i)]; }

  int64_t block_tokens() const { return block_tokens_; }
  // Per-sequence recurrent state (LayerCacheSpec::state_floats): its floats in
  // all layers, and the offset of layer i's within a sequence's state.
  int64_t state_floats() const { return state_floats_; }
  int64_t state_offset(int64_t i) const { return state_offsets_[size_t(i)]; }
  uint64_t state_bytes_per_sequence() const { return uint64_t(state_floats_) * sizeof(float); }
  int64_t num_blocks() const { return int64_t(refs_.size()); }
  int64_t used_blocks() const { return used_; }
  uint64_t bytes_per_token() const { return bytes_per_token_; }

  // A free block's index, or -1 when all are in use. A free block may be a
  // cached one (below): the least recently released of those is evicted
  // only when no block free of content is left.
  int32_t TakeBlock();
  // Drops one reference; at none the block is free (kept as cached content
  // when it was published).
  void ReturnBlock(int32_t block);

  // Prefix caching: a full block's keys and values are a function of the
  // tokens up to its end, so a block published under the hash of that prefix
  // (PrefixBlockHash) can serve any sequence starting with the same tokens.
  // Cached blocks stay readable while referenced and, when free, until they
  // are evicted (LRU). `tokens`: the block's own tokens, compared on lookup so
  // a hash collision cannot hand out wrong content.
  void Publish(int32_t block, uint64_t hash, std::span<const int32_t> tokens);
  // The block published under `hash` with these tokens, with a reference
  // taken; -1 when none.
  int32_t AcquireCached(uint64_t hash, std::span<const int32_t> tokens);
  int64_t cached_blocks() const { return int64_t(by_hash_.size()); }
  // Forgets every published prefix: the weights its keys and values came
  // from have changed (a live expert swap). Blocks in use keep their content
  // for their sequence but are no longer shared; free ones become plain free.
  void DropCachedContent();

 private:
  KvPool() = default;
  void Unpublish(int32_t block);

  std::unique_ptr<Buffer> buffer_;
  std::vector<Layer> layers_;
  int64_t block_tokens_ = 0;
  Backend* backend_ = nullptr;  // allocates each sequence's recurrent state
  int64_t state_floats_ = 0;
  std::vector<int64_t> state_offsets_;
  friend class KvCache;
  std::vector<int32_t> free_;  // stack of free blocks without cached content
  std::vector<int32_t> refs_;  // references per block
  int64_t used_ = 0;           // blocks with references
  uint64_t bytes_per_token_ = 0;
  // Published blocks: hash -> block, and per block its hash and tokens.
  std::unordered_map<uint64_t, int32_t> by_hash_;
  struct Cached {
    bool published = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;  // valid while free and published
  };
  std::vector<Cached> cached_;
  std::list<int32_t> lru_;  // free published blocks, least recently freed first
};

// The hash of a token prefix ending with `block` (the block's tokens), given
// the hash of the prefix before it (0 for the first block).
uint64_t PrefixBlockHash(uint64_t previous, std::span<const int32_t> block);

class KvCache {
 public:
  // A sequence of up to `capacity` tokens in `pool`; `own_pool` keeps the pool
  // alive with it (a cache made for one sequence).
  KvCache(KvPool* pool, int64_t capacity, std::unique_ptr<KvPool> own_pool = nullptr);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvPool::Layer& layer(int64_t i) const { return pool_->layer(i); }
  KvPool& pool() { return *pool_; }

  // Pool row of each position in [0, reserved).
  std::span<const int32_t> rows() const { return rows_; }
  // Makes positions [0, tokens) addressable, taking blocks from the pool. Errors
  // when `tokens` exceeds the capacity ("context full") or the pool has no free
  // block ("KV cache full"); nothing changes then.
  Status Reserve(int64_t tokens);
  // Returns every block to the pool and empties the sequence.
  void Release();
  // Starts an empty sequence with `blocks` (references already taken, e.g.
  // by KvPool::AcquireCached) as its first positions; its length becomes
  // their tokens. They must never be written: a sequence only writes past
  // its length, and shared blocks are full.
  void Adopt(std::span<const int32_t> blocks);
  std::span<const int32_t> block_ids() const { return blocks_; }
  // Serving under expert parallelism: this sequence becomes a replica of
  // another rank's, the same `blocks` of an identical pool and `length`
  // tokens. No references are taken (the other rank's scheduler owns the
  // blocks; this pool only mirrors their contents), and Release returns none.
  // An error, with nothing changed, for a block outside the pool or a length
  // past the blocks or the capacity.
  Status Mirror(std::span<const int32_t> blocks, int64_t length);

  // A sequence's recurrent state in layer i (LayerCacheSpec::state_floats;
  // allocated by the first Reserve, zeros then), and how many of its tokens it
  // has consumed: the model checks that against length() before each step,
  // since truncating the cache (rollback) or adopting cached blocks cannot
  // rebuild it.
  Tensor state(int64_t i) const;
  int64_t state_tokens() const { return state_tokens_; }
  void set_state_tokens(int64_t n) { state_tokens_ = n; }
  // Speculative decoding: a copy of the whole recurrent state taken before a
  // verify step (allocated once, the same fixed size), and putting it back
  // after a partial accept, with the state's token count of that moment; the
  // caller then cuts length() to it and replays the accepted tokens.
  Status CheckpointState();
  // False (nothing changed) when there is no checkpoint.
  bool RestoreState();
  int64_t checkpoint_tokens() const { return checkpoint_tokens_; }

  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  void Clear() { length_ = 0; }
  int64_t blocks() const { return int64_t(blocks_.size()); }
  uint64_t bytes_per_token() const { return pool_->bytes_per_token(); }

 private:
  std::unique_ptr<KvPool> own_pool_;
  KvPool* pool_;
  int64_t capacity_;
  int64_t length_ = 0;
  bool mirrored_ = false;  // blocks referenced by another rank (Mirror)
  std::vector<int32_t> blocks_;
  std::vector<int32_t> rows_;
  std::unique_ptr<Buffer> state_buffer_;
  int64_t state_tokens_ = 0;
  std::unique_ptr<Buffer> checkpoint_buffer_;
  int64_t checkpoint_tokens_ = -1;  // -1: no checkpoint
};

}  // namespace anymoe
