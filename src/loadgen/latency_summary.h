// Mean and percentiles of a latency sample, as bench-serve reports them
// (percentiles by linear interpolation between order statistics, numpy's
// default, so numbers compare with vLLM's benchmark_serving).
#pragma once

#include <cstddef>
#include <vector>

namespace anymoe {

struct LatencySummary {
  size_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, max = 0;
};

// `p` in [0, 100] of `sorted` (ascending); 0 when empty.
double Percentile(const std::vector<double>& sorted, double p);
LatencySummary Summarize(std::vector<double> values);

}  // namespace anymoe
