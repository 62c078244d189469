// Whether loading a layer's predicted experts ahead of need pays, judged from
// how often such loads were used lately.
//
// A prefetch only has to read the predicted experts the cache does not hold
// (the candidates). A used candidate hides its read behind the compute before
// its layer; an unused one costs a whole read (disk bandwidth, and on the CPU
// the panel repacking, both taken from the steps' own misses and compute) and
// evicts an expert that may be needed next. So the gate counts, per layer
// step, the candidates and how many of them the layer then used, whether they
// were read or not (while closed it keeps judging the predictor), and opens
// while the recent share used is at least `min_use`. Nothing here changes
// results: only which reads start early.
//
// Measured (docs/benchmarks.md, 2026-12-06, third session): on the
// GLM-4.5-shaped mini bench file with a 25 % cache the predictor named the
// right experts ~60 % of the time, but the right ones were mostly cached
// already: 11-21 % of the reads it started were used, and decode ran at
// 0.6-0.7x of no prefetch; with the gate at 0.5 it ran within 10 % of no
// prefetch. On the Air-shaped 3-layer file with a 10 % cache 68 % of the
// reads were used, and the gate stays open.
#pragma once

#include <cstdint>

namespace anymoe {

class PrefetchGate {
 public:
  // Below half used, the reads a prefetch wastes outnumber those it hides.
  static constexpr double kDefaultMinUse = 0.5;
  // The evidence decays with a half-life of this many candidates, so the
  // gate follows a change of workload within a few hundred expert reads.
  static constexpr double kDefaultHalfLife = 256;
  // Candidates seen before the gate may close: until then it is open.
  static constexpr double kWarmup = 32;

  explicit PrefetchGate(double min_use = kDefaultMinUse, double half_life = kDefaultHalfLife);

  // Whether to load candidates now.
  bool open() const;
  // One layer step's outcome: `candidates` predicted experts were not cached
  // when predicted; `used` of them were then used by that layer.
  void Record(uint64_t candidates, uint64_t used);

  double used_share() const;  // the decayed share used (1 before any candidate)

 private:
  double min_use_;
  double decay_per_candidate_;
  double candidates_ = 0, used_ = 0;  // decayed sums
  uint64_t seen_ = 0;                 // candidates ever seen (warm-up)
};

}  // namespace anymoe
