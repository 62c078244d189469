// Each pass hands 16 MiB chunks of the buffer to the thread pool; a chunk is
// summed as 64-bit words into eight independent accumulators, so the loop is
// bound by loads, not by an add chain (even SSE2 issues loads far faster than
// DRAM delivers them). Each pass's sum is checked against the known contents,
// which both keeps the reads observable and catches a broken pass.
#include "bench/membw.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "backends/cpu/huge_page_arena.h"
#include "core/thread_pool.h"

namespace anymoe {
namespace {

constexpr uint64_t kChunkBytes = uint64_t(16) << 20;

// `n` is a multiple of 8 (a chunk is 16 MiB).
uint64_t SumWords(const uint64_t* p, uint64_t n) {
  uint64_t a[8] = {};
  for (uint64_t i = 0; i < n; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  }
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

}  // namespace

double MembwResult::best_gbs() const {
  return pass_gbs.empty() ? 0 : *std::max_element(pass_gbs.begin(), pass_gbs.end());
}

double MembwResult::median_gbs() const {
  if (pass_gbs.empty()) return 0;
  std::vector<double> v = pass_gbs;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Expected<MembwResult> MeasureReadBandwidth(const MembwOptions& options) {
  if (options.threads < 1 || options.threads > 4096) {
    return Status::Error("memory bandwidth: threads must be in [1, 4096], got " +
                         std::to_string(options.threads));
  }
  if (options.passes < 1) {
    return Status::Error("memory bandwidth: passes must be at least 1, got " +
                         std::to_string(options.passes));
  }
  const uint64_t bytes = (options.buffer_bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
  if (bytes == 0 || bytes > (uint64_t(1) << 40)) {
    return Status::Error("memory bandwidth: buffer of " + std::to_string(options.buffer_bytes) +
                         " bytes is out of range (1 byte .. 1 TiB)");
  }
  // In huge pages, like the weights the CPU backend streams in decode, so the
  // bound is measured on the same kind of memory. (On the bench VM a plain
  // streaming read gets the same figure either way: 35.7 / 35.8 GB/s with
  // 4 KiB pages, 35.3 / 36.3 in huge pages, 2 threads, one sitting.)
  // Placed as the engine's threads and weights will be (its backend sets the
  // same policy again).
  NumaPlacement placement;
  if (options.numa != NumaMode::kNone) {
    const CpuTopology topology = ReadCpuTopology();
    placement = PlanNumaPlacement(topology, options.numa, options.threads, CurrentNumaNode(topology));
    RETURN_IF_ERROR(ApplyMemoryPolicy(placement));
  }
  cpu::HugePageArena arena;
  ASSIGN_OR_RETURN(uint8_t* buffer, arena.Allocate(bytes, "the memory bandwidth buffer"));
  uint64_t* words = reinterpret_cast<uint64_t*>(buffer);
  const int64_t chunks = int64_t(bytes / kChunkBytes);
  const uint64_t words_per_chunk = kChunkBytes / sizeof(uint64_t);

  ThreadPool pool(options.threads, placement.thread_cpus);
  // Non-zero contents: the kernel may not map every page to the shared zero page.
  pool.ParallelFor(chunks, [&](int64_t c, int) {
    uint64_t* p = words + uint64_t(c) * words_per_chunk;
    for (uint64_t i = 0; i < words_per_chunk; ++i) p[i] = uint64_t(c) * words_per_chunk + i;
  });

  // Word i holds i, so a pass sums to n(n-1)/2 (mod 2^64).
  const uint64_t n_words = bytes / sizeof(uint64_t);
  const uint64_t expected =
      n_words % 2 == 0 ? (n_words / 2) * (n_words - 1) : n_words * ((n_words - 1) / 2);
  std::atomic<uint64_t> sum{0};
  auto read_pass = [&] {
    sum.store(0, std::memory_order_relaxed);
    pool.ParallelFor(chunks, [&](int64_t c, int) {
      sum.fetch_add(SumWords(words + uint64_t(c) * words_per_chunk, words_per_chunk),
                    std::memory_order_relaxed);
    });
    return sum.load() == expected;
  };

  MembwResult result;
  result.threads = options.threads;
  result.buffer_bytes = bytes;
  bool sums_ok = read_pass();  // warm-up: TLB, page tables, thread wake-up
  for (int pass = 0; pass < options.passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    sums_ok &= read_pass();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.pass_gbs.push_back(double(bytes) / seconds / 1e9);
  }
  if (!sums_ok) return Status::Error("memory bandwidth: a read pass summed the buffer wrongly");
  return result;
}

}  // namespace anymoe
