#include "backends/cpu/huge_page_arena.h"

#include <gtest/gtest.h>

#include <cstring>

namespace anymoe::cpu {
namespace {

TEST(HugePageArena, HandsOutAlignedDisjointWritableBytes) {
  HugePageArena arena;
  auto a = arena.Allocate(100, "a");
  auto b = arena.Allocate(HugePageArena::kChunkBytes + 1, "b");  // its own chunk
  auto c = arena.Allocate(1, "c");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (uint8_t* p : {*a, *b, *c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(*a, 1, 100);
  std::memset(*b, 2, HugePageArena::kChunkBytes + 1);
  std::memset(*c, 3, 1);
  EXPECT_EQ((*a)[99], 1);
  EXPECT_EQ((*b)[0], 2);
  EXPECT_EQ((*b)[HugePageArena::kChunkBytes], 2);
  EXPECT_EQ((*c)[0], 3);
  EXPECT_EQ(arena.bytes_in_use(), 128 + (HugePageArena::kChunkBytes + 64) + 64);
}

TEST(HugePageArena, NamesWhatItCouldNotMap) {
  HugePageArena arena;
  auto p = arena.Allocate(uint64_t(1) << 62, "blk.0.ffn_up_exps.weight (panel layout)");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("blk.0.ffn_up_exps.weight"), std::string::npos);
}

}  // namespace
}  // namespace anymoe::cpu
