#include "backends/cpu/huge_page_arena.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace anymoe::cpu {
namespace {

uint64_t PageBytes() { return uint64_t(sysconf(_SC_PAGESIZE)); }
uint64_t RoundUpToPage(uint64_t n) { return (n + PageBytes() - 1) / PageBytes() * PageBytes(); }

// Where the mapping holding `p` ends (/proc/self/maps); 0 if none holds it.
uintptr_t MappingEnd(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &begin, &end) == 2 && begin <= at && at < end) {
      return uintptr_t(end);
    }
  }
  return 0;
}

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

// A buffer's mapping ends with its last base page, not its last huge page:
// khugepaged (max_ptes_none 511 by default) or a fault would otherwise back a
// whole 2 MiB page past the end with memory the buffer never uses, outside
// the memory plan.
TEST(HugePageArena, MappingsEndWithTheirLastBasePage) {
  const uint64_t bytes = 3 * HugePageArena::kHugePage + 5;
  uint8_t* p = MapHugePages(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % HugePageArena::kHugePage, 0u);
  std::memset(p, 7, bytes);
  EXPECT_EQ(MappingEnd(p), reinterpret_cast<uintptr_t>(p) + RoundUpToPage(bytes));
  UnmapHugePages(p, bytes);
  EXPECT_EQ(MappingEnd(p), 0u);
}

// A chunk that takes no more (a new one started, or Seal) keeps its pages up
// to its last allocation and gives back the rest.
TEST(HugePageArena, ChunksGiveBackTheirUnusedTail) {
  HugePageArena arena;
  auto a = arena.Allocate(5 * HugePageArena::kHugePage + 100, "a");
  ASSERT_TRUE(a.ok());
  const uint64_t a_bytes = 5 * HugePageArena::kHugePage + 128;  // 64-byte steps
  EXPECT_EQ(MappingEnd(*a), reinterpret_cast<uintptr_t>(*a) + HugePageArena::kChunkBytes);
  auto b = arena.Allocate(HugePageArena::kChunkBytes, "b");  // does not fit: a new chunk
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(MappingEnd(*a), reinterpret_cast<uintptr_t>(*a) + RoundUpToPage(a_bytes));
  std::memset(*a, 1, a_bytes);
  auto c = arena.Allocate(100, "c");  // a third chunk: b's is full
  ASSERT_TRUE(c.ok());
  arena.Seal();
  EXPECT_EQ(MappingEnd(*c), reinterpret_cast<uintptr_t>(*c) + RoundUpToPage(128));
  std::memset(*c, 3, 100);
  // What is left of c's page still serves small allocations; a bigger one
  // starts a new chunk.
  auto d = arena.Allocate(64, "d");
  auto e = arena.Allocate(PageBytes(), "e");
  ASSERT_TRUE(d.ok() && e.ok());
  EXPECT_EQ(*d, *c + 128);
  EXPECT_EQ(MappingEnd(*e), reinterpret_cast<uintptr_t>(*e) + HugePageArena::kChunkBytes);
  EXPECT_EQ(arena.bytes_in_use(), a_bytes + HugePageArena::kChunkBytes + 128 + 64 + PageBytes());
}

TEST(HugePageArena, NamesWhatItCouldNotMap) {
  HugePageArena arena;
  auto p = arena.Allocate(uint64_t(1) << 62, "blk.0.ffn_up_exps.weight (panel layout)");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("blk.0.ffn_up_exps.weight"), std::string::npos);
}

}  // namespace
}  // namespace anymoe::cpu
