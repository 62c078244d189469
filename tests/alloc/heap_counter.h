// Live and peak bytes of the C++ heap (operator new) in the alloc test binary,
// kept by the replacement operators in decode_alloc_test.cc. Memory mapped
// files are not heap: a model file's own bytes never count.
#pragma once

#include <atomic>
#include <cstdint>

namespace anymoe::testing {

extern std::atomic<int64_t> g_heap_live;
extern std::atomic<int64_t> g_heap_peak;

// Peak heap growth over the live bytes at construction, while this lives.
class HeapPeak {
 public:
  HeapPeak() : base_(g_heap_live.load()) { g_heap_peak.store(base_); }
  int64_t growth() const { return g_heap_peak.load() - base_; }

 private:
  int64_t base_;
};

}  // namespace anymoe::testing
