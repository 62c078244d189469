// The synthetic workload of bench-serve: prompts of about N tokens built from
// a fixed list of common English words (most are one token in BPE vocabularies,
// so word count approximates token count on any server), and request arrival
// times of a Poisson process. Both are fixed by the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace anymoe {

// `count` prompts of `words` words each.
std::vector<std::string> RandomPrompts(int count, int words, uint64_t seed);

// Arrival offsets in seconds from the start, non-decreasing: exponential gaps
// with mean 1/rate. rate <= 0 or infinite: everything at 0 (send at once).
std::vector<double> PoissonArrivals(int count, double rate, uint64_t seed);

}  // namespace anymoe
