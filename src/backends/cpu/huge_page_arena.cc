#include "backends/cpu/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace anymoe::cpu {
namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// What a mapping of `bytes` keeps: whole base pages (4 KiB on x86, up to 64
// KiB on aarch64).
uint64_t MappedBytes(uint64_t bytes) {
  static const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  return RoundUp(std::max<uint64_t>(bytes, 1), page);
}

}  // namespace

uint8_t* MapHugePages(uint64_t bytes) {
  constexpr uint64_t kAlign = HugePageArena::kHugePage;
  const uint64_t size = RoundUp(std::max<uint64_t>(bytes, 1), kAlign);
  void* p = mmap(nullptr, size + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = RoundUp(raw, kAlign);
  // Give back the unaligned head and everything past `bytes` in whole base
  // pages (never empty: the head takes less than kAlign). The mapping ends
  // with the buffer, not with its last huge page: a huge page there would
  // back up to 2 MiB the buffer never uses (on a fault, or when khugepaged
  // collapses the range around one touched page), memory outside the plan.
  if (aligned > raw) munmap(p, aligned - raw);
  const uint64_t keep = MappedBytes(bytes);
  munmap(reinterpret_cast<void*>(aligned + keep), raw + size + kAlign - (aligned + keep));
  auto* base = reinterpret_cast<uint8_t*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(base, keep, MADV_HUGEPAGE);
#endif
  return base;
}

void UnmapHugePages(uint8_t* base, uint64_t bytes) {
  if (base == nullptr) return;
  munmap(base, MappedBytes(bytes));
}

void PopulatePages(uint8_t* base, uint64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  // Kernels before 5.14: one write per 4 KiB page (the memory is fresh and
  // zero, so writing zero changes nothing but the mapping).
  for (uint64_t i = 0; i < bytes; i += 4096) base[i] = 0;
}

HugePageArena::~HugePageArena() {
  for (const Chunk& c : chunks_) UnmapHugePages(c.base, c.size);
}

Expected<uint8_t*> HugePageArena::Allocate(uint64_t bytes, const std::string& what) {
  bytes = RoundUp(std::max<uint64_t>(bytes, 1), 64);
  if (chunks_.empty() || chunks_.back().size - chunks_.back().used < bytes) {
    Seal();  // the last chunk takes no more
    const uint64_t size = RoundUp(std::max(bytes, kChunkBytes), kHugePage);
    uint8_t* base = MapHugePages(size);
    if (base == nullptr) {
      return Status::Error("cpu: cannot map " + std::to_string(size) + " bytes for " + what +
                           ": " + std::strerror(errno));
    }
    chunks_.push_back(Chunk{base, size, 0});
  }
  Chunk& c = chunks_.back();
  uint8_t* p = c.base + c.used;
  c.used += bytes;
  return p;
}

void HugePageArena::Seal() {
  if (chunks_.empty()) return;
  Chunk& c = chunks_.back();
  const uint64_t keep = MappedBytes(c.used);
  if (keep >= c.size) return;
  munmap(c.base + keep, c.size - keep);
  c.size = keep;
}

uint64_t HugePageArena::bytes_in_use() const {
  uint64_t n = 0;
  for (const Chunk& c : chunks_) n += c.used;
  return n;
}

}  // namespace anymoe::cpu
