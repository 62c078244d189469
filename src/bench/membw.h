// The machine's read memory bandwidth, measured the way decoding uses memory:
// threads streaming through a buffer far larger than the caches. It is the
// numerator of the decode roofline (see roofline.h): a token cannot be
// generated faster than its weights can be read.
#pragma once

#include <cstdint>
#include <vector>

#include "core/numa.h"
#include "core/status.h"

namespace anymoe {

struct MembwOptions {
  int threads = 1;                            // counts the calling thread
  uint64_t buffer_bytes = uint64_t(1) << 30;  // 1 GiB: far beyond any last-level cache
  int passes = 5;                             // timed passes, after one untimed warm-up pass
  NumaMode numa = NumaMode::kNone;            // threads and pages placed as `anymoe --numa`
};

struct MembwResult {
  int threads = 0;
  uint64_t buffer_bytes = 0;
  std::vector<double> pass_gbs;  // GB/s (1e9 bytes/s) of each timed pass
  double best_gbs() const;
  double median_gbs() const;
};

// Fills a fresh buffer (first touch from the reading threads), then times
// `passes` full reads of it, each split across `threads`. Errors on bad options
// or when the buffer cannot be allocated.
Expected<MembwResult> MeasureReadBandwidth(const MembwOptions& options);

}  // namespace anymoe
