#include "bench/bench_result.h"

#include <cmath>

namespace anymoe {

std::string BenchTest::Name() const {
  std::string depth = n_depth > 0 ? " @ d" + std::to_string(n_depth) : "";
  if (index_topk > 0) depth += " topk" + std::to_string(index_topk);
  if (n_gen == 0) return "pp" + std::to_string(n_prompt) + depth;
  if (!spec.empty()) {
    std::string name = "tg" + std::to_string(n_gen) + " @ prompt";
    if (spec != "none") name += " " + spec + "/" + std::to_string(n_draft);
    return name;
  }
  if (n_prompt == 0) {
    std::string name = "tg" + std::to_string(n_gen);
    if (n_parallel > 1) name += 'x' + std::to_string(n_parallel);
    return name + depth;
  }
  return "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen) + depth;
}

std::vector<double> BenchResult::samples_ts() const {
  std::vector<double> ts;
  ts.reserve(samples_ns.size());
  for (uint64_t ns : samples_ns) ts.push_back(ns > 0 ? 1e9 * double(tokens()) / double(ns) : 0.0);
  return ts;
}

double Mean(std::span<const double> v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / double(v.size());
}

double SampleStddev(std::span<const double> v) {
  if (v.size() < 2) return 0;
  const double mean = Mean(v);
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / double(v.size() - 1));
}

}  // namespace anymoe
