// Proves the decode loop allocates nothing: global operator new/delete are
// replaced (for this test binary only) by counting versions (which also keep
// the live and peak heap bytes for heap_counter.h), and a decode step
// (forward one token, read the logits, sample) must not touch them once warm,
// for a dense model, a GQA MoE model and an MLA + DSA MoE model.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "heap_counter.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/sampler.h"

namespace anymoe::testing {
std::atomic<int64_t> g_heap_live{0};
std::atomic<int64_t> g_heap_peak{0};
}  // namespace anymoe::testing

namespace {
std::atomic<int64_t> g_allocations{0};

void* CountedAlloc(std::size_t n, std::size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  using anymoe::testing::g_heap_live;
  using anymoe::testing::g_heap_peak;
  const int64_t live =
      g_heap_live.fetch_add(int64_t(malloc_usable_size(p)), std::memory_order_relaxed) +
      int64_t(malloc_usable_size(p));
  int64_t peak = g_heap_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_heap_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void CountedFree(void* p) {
  if (p == nullptr) return;
  anymoe::testing::g_heap_live.fetch_sub(int64_t(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(std::size_t n) { return CountedAlloc(n, 0); }
void* operator new[](std::size_t n) { return CountedAlloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return CountedAlloc(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return CountedAlloc(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return CountedAlloc(n, 0); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try { return CountedAlloc(n, std::size_t(a)); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { CountedFree(p); }
void operator delete[](void* p) noexcept { CountedFree(p); }
void operator delete(void* p, std::size_t) noexcept { CountedFree(p); }
void operator delete[](void* p, std::size_t) noexcept { CountedFree(p); }
void operator delete(void* p, std::align_val_t) noexcept { CountedFree(p); }
void operator delete[](void* p, std::align_val_t) noexcept { CountedFree(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { CountedFree(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { CountedFree(p); }

namespace anymoe {
namespace {

class DecodeAllocations : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeAllocations, WarmDecodeStepAllocatesNothing) {
  // Every SIMD target: a buffer one target sizes lazily shows only on a CPU
  // whose best target it is (a Zen 5 CI machine found one).
  testing::ForEachTarget([&] {
    auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/" + GetParam());
    ASSERT_TRUE(file.ok()) << file.status().message();
    auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    auto model = std::move(LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 16})).value();
    auto cache = std::move(model->NewCache(64)).value();
    const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    std::vector<float> logits(size_t(model->config().vocab_size));
    std::vector<int32_t> history(prompt);
    history.reserve(64);
    SamplingParams params;
    params.temperature = 0.8f;
    params.seed = 1;
    Sampler sampler(params);
    ASSERT_TRUE(model->Forward(prompt, *cache, false).ok());

    auto step = [&] {
      const int32_t token[1] = {history.back()};
      Tensor out = model->Forward(token, *cache, false).value();
      backend->ReadF32(out, logits);
      history.push_back(sampler.Sample(logits, history));
    };
    for (int i = 0; i < 3; ++i) step();  // warm-up: first-use growth of reusable buffers
    const int64_t before = g_allocations.load();
    for (int i = 0; i < 20; ++i) step();
    EXPECT_EQ(g_allocations.load() - before, 0) << "heap allocations in 20 decode steps";
  });
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeAllocations,
                         ::testing::Values("llama_tiny", "moe/glm4_moe", "moe/glm_moe_dsa"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace anymoe
