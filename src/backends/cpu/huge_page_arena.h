// Host memory for the weights the CPU backend stores in its own layout, backed
// by 2 MiB transparent huge pages where the system allows it (THP "madvise" or
// "always"). A decode step streams every weight once: with 4 KiB pages that is
// a TLB miss every 4 KiB of it, a cost the hardware prefetchers cannot hide.
// Measured on the 2-vCPU bench VM (interleaved pairs, tg64 / tg64x8 t/s):
// SmolLM2 Q8_0 194 / 647 -> 226 / 999 and 229 / 913 -> 250 / 1060; MoE Q4_0
// 259 / 433 -> 315 / 526 and 311 / 501 -> 332 / 533.
//
// Allocations are bump-allocated from chunks of at least kChunkBytes and live
// as long as the arena. A chunk's unused tail is unmapped when the chunk takes
// no more (a new chunk starts, or Seal): left mapped, the huge page holding the
// last allocation's end would back up to 2 MiB that nothing uses.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace anymoe::cpu {

// `bytes` of anonymous memory (rounded up to whole base pages), starting on a
// huge page boundary and advised as huge pages (only advice: without THP,
// 4 KiB pages; the tail past the last whole huge page is always base pages);
// null when the system refuses. Free with UnmapHugePages.
uint8_t* MapHugePages(uint64_t bytes);
void UnmapHugePages(uint8_t* base, uint64_t bytes);
// Backs [base, base + bytes) with memory now (zero-filled), as a first write
// would, so that later accesses do not fault.
void PopulatePages(uint8_t* base, uint64_t bytes);

class HugePageArena {
 public:
  static constexpr uint64_t kHugePage = uint64_t(2) << 20;
  static constexpr uint64_t kChunkBytes = uint64_t(64) << 20;

  HugePageArena() = default;
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;
  ~HugePageArena();

  // `bytes` bytes, 64-byte aligned; errors name `what` when memory runs out.
  Expected<uint8_t*> Allocate(uint64_t bytes, const std::string& what);

  // Gives back the last chunk's pages past its last allocation: a later
  // allocation that does not fit what is left of that page starts a new
  // chunk. (When loading is done: Backend::FinishLoad.)
  void Seal();

  // Bytes handed out so far.
  uint64_t bytes_in_use() const;

 private:
  struct Chunk {
    uint8_t* base;
    uint64_t size, used;
  };
  std::vector<Chunk> chunks_;
};

}  // namespace anymoe::cpu
