// The KV pool's shared blocks for prefix caching: references, publishing
// under a prefix hash, lookups that compare tokens, LRU eviction of free
// cached blocks only when no empty block is left, and no leaked blocks; a
// mirrored block table (serving under expert parallelism) takes no references.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "models/kv_cache.h"

namespace anymoe {
namespace {

class KvPrefixCache : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 1})).value();
    LayerCacheSpec layer;
    layer.kv_heads = 1;
    layer.k_dim = layer.v_dim = 4;
    pool_ = std::move(KvPool::Create(*backend_, 4, 2, {layer})).value();  // 4 blocks of 2
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvPool> pool_;
};

TEST_F(KvPrefixCache, SharedBlocksAreCountedOnceAndEvictedLeastRecentFirst) {
  const std::vector<int32_t> t1 = {5, 6}, t2 = {7, 8}, t3 = {9, 10};
  const uint64_t h1 = PrefixBlockHash(0, t1), h2 = PrefixBlockHash(h1, t2);
  EXPECT_NE(h1, PrefixBlockHash(0, t2));
  EXPECT_NE(h2, PrefixBlockHash(PrefixBlockHash(0, t3), t2));  // the prefix counts

  auto a = std::make_unique<KvCache>(pool_.get(), 8);
  ASSERT_TRUE(a->Reserve(5).ok());  // 3 blocks
  EXPECT_EQ(pool_->used_blocks(), 3);
  pool_->Publish(a->block_ids()[0], h1, t1);
  pool_->Publish(a->block_ids()[1], h2, t2);
  EXPECT_EQ(pool_->cached_blocks(), 2);

  // A second sequence takes references on both; the pool still uses 3 blocks.
  const int32_t b1 = pool_->AcquireCached(h1, t1), b2 = pool_->AcquireCached(h2, t2);
  EXPECT_EQ(b1, a->block_ids()[0]);
  EXPECT_EQ(b2, a->block_ids()[1]);
  EXPECT_EQ(pool_->AcquireCached(h2, t3), -1);  // same hash, other tokens: no match
  EXPECT_EQ(pool_->used_blocks(), 3);
  KvCache b(pool_.get(), 8);
  const int32_t adopted[] = {b1, b2};
  b.Adopt(adopted);
  EXPECT_EQ(b.length(), 4);
  EXPECT_EQ(b.rows()[2], b2 * 2);

  a.reset();  // the shared blocks stay with b; a's third block is free
  EXPECT_EQ(pool_->used_blocks(), 2);
  b.Release();
  EXPECT_EQ(pool_->used_blocks(), 0);
  EXPECT_EQ(pool_->cached_blocks(), 2);  // free but still cached

  // Two empty blocks are taken before any cached one is evicted; then the
  // least recently freed cached block (b1, freed before b2) goes first.
  KvCache c(pool_.get(), 8);
  ASSERT_TRUE(c.Reserve(4).ok());
  EXPECT_EQ(pool_->cached_blocks(), 2);
  KvCache d(pool_.get(), 8);
  ASSERT_TRUE(d.Reserve(2).ok());
  EXPECT_EQ(d.block_ids()[0], b1);
  EXPECT_EQ(pool_->cached_blocks(), 1);
  EXPECT_EQ(pool_->AcquireCached(h1, t1), -1);
  const int32_t again = pool_->AcquireCached(h2, t2);  // out of the LRU, in use
  EXPECT_EQ(again, b2);
  EXPECT_EQ(pool_->used_blocks(), 4);
  KvCache e(pool_.get(), 8);
  EXPECT_FALSE(e.Reserve(2).ok());  // nothing left to evict
  pool_->ReturnBlock(again);
  c.Release();
  d.Release();
  EXPECT_EQ(pool_->used_blocks(), 0);
}

// A live expert swap drops every cached prefix (its keys and values came from
// the old weights): free cached blocks become plain free blocks, a block in
// use keeps its sequence but is shared no more, and none leaks.
TEST_F(KvPrefixCache, DroppedContentIsNeverHandedOutAgain) {
  const std::vector<int32_t> t1 = {5, 6}, t2 = {7, 8};
  const uint64_t h1 = PrefixBlockHash(0, t1), h2 = PrefixBlockHash(h1, t2);
  auto a = std::make_unique<KvCache>(pool_.get(), 8);
  ASSERT_TRUE(a->Reserve(4).ok());  // 2 blocks
  pool_->Publish(a->block_ids()[0], h1, t1);
  pool_->Publish(a->block_ids()[1], h2, t2);
  KvCache in_use(pool_.get(), 8);
  const int32_t kept[] = {pool_->AcquireCached(h1, t1)};
  ASSERT_GE(kept[0], 0);
  in_use.Adopt(kept);
  a.reset();  // block h2 is free and cached, h1 still in use by `in_use`
  EXPECT_EQ(pool_->cached_blocks(), 2);
  pool_->DropCachedContent();
  EXPECT_EQ(pool_->cached_blocks(), 0);
  EXPECT_EQ(pool_->AcquireCached(h1, t1), -1);
  EXPECT_EQ(pool_->AcquireCached(h2, t2), -1);
  EXPECT_EQ(pool_->used_blocks(), 1);
  in_use.Release();
  EXPECT_EQ(pool_->used_blocks(), 0);
  // All four blocks can be taken again, the dropped ones among them.
  KvCache all(pool_.get(), 8);
  EXPECT_TRUE(all.Reserve(8).ok());
  EXPECT_EQ(pool_->used_blocks(), 4);
  EXPECT_EQ(pool_->AcquireCached(h1, t1), -1);
}

TEST_F(KvPrefixCache, MirrorAddressesAnotherRanksBlocksWithoutReferences) {
  // Serving under expert parallelism: a replica of rank 0's sequence.
  KvCache m(pool_.get(), 8);
  const int32_t blocks[] = {3, 1};
  ASSERT_TRUE(m.Mirror(blocks, 3).ok());
  EXPECT_EQ(m.length(), 3);
  ASSERT_EQ(m.rows().size(), 4u);
  EXPECT_EQ(m.rows()[0], 6);
  EXPECT_EQ(m.rows()[3], 3);
  EXPECT_EQ(pool_->used_blocks(), 0);  // no references taken...
  const int32_t next[] = {0};
  ASSERT_TRUE(m.Mirror(next, 2).ok());  // ...and none returned when it changes
  EXPECT_EQ(m.rows()[1], 1);
  m.Release();
  EXPECT_EQ(pool_->used_blocks(), 0);
  KvCache all(pool_.get(), 8);
  ASSERT_TRUE(all.Reserve(8).ok());  // every block is still free

  // Refused, nothing changed: a block outside the pool, a length past the blocks.
  const int32_t outside[] = {0, 4};
  EXPECT_NE(m.Mirror(outside, 1).message().find("KV block 4 is outside the pool of 4 blocks"),
            std::string::npos);
  EXPECT_NE(m.Mirror(next, 3).message().find("KV length 3 does not fit 1 blocks"),
            std::string::npos);
  EXPECT_EQ(m.length(), 0);
}

}  // namespace
}  // namespace anymoe
