#include "models/experts/prefetch_gate.h"

#include <cmath>

namespace anymoe {

PrefetchGate::PrefetchGate(double min_use, double half_life)
    : min_use_(min_use), decay_per_candidate_(std::exp2(-1.0 / half_life)) {}

bool PrefetchGate::open() const {
  return double(seen_) < kWarmup || used_ >= min_use_ * candidates_;
}

void PrefetchGate::Record(uint64_t candidates, uint64_t used) {
  if (candidates == 0) return;
  const double keep = std::pow(decay_per_candidate_, double(candidates));
  candidates_ = candidates_ * keep + double(candidates);
  used_ = used_ * keep + double(used);
  seen_ += candidates;
}

double PrefetchGate::used_share() const { return candidates_ > 0 ? used_ / candidates_ : 1.0; }

}  // namespace anymoe
