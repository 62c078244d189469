#include "models/experts/expert_slot_table.h"

#include <cmath>
#include <limits>

#include "core/check.h"

namespace anymoe {

std::string_view EvictionPolicyName(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::kLru:
      return "lru";
    case EvictionPolicy::kLfu:
      return "lfu";
    case EvictionPolicy::kLfru:
      return "lfru";
  }
  return "?";
}

std::optional<EvictionPolicy> ParseEvictionPolicy(std::string_view name) {
  for (EvictionPolicy p : {EvictionPolicy::kLru, EvictionPolicy::kLfu, EvictionPolicy::kLfru}) {
    if (name == EvictionPolicyName(p)) return p;
  }
  return std::nullopt;
}

ExpertSlotTable::ExpertSlotTable(int64_t slots, int64_t ids, EvictionPolicy policy,
                                 double half_life)
    : policy_(policy),
      half_life_(half_life > 0 ? half_life
                               : kDefaultHalfLifeSlots * double(std::max<int64_t>(slots, 1))),
      id_of_(size_t(slots), -1),
      slot_of_(size_t(ids), -1),
      pins_(size_t(slots), 0),
      last_(size_t(slots), 0),
      uses_(size_t(ids), 0),
      lfru_key_(size_t(ids), -std::numeric_limits<double>::infinity()) {
  CHECK(slots >= 1 && ids >= 1);
  for (int64_t s = slots - 1; s >= 0; --s) free_.push_back(int32_t(s));
}

std::pair<double, double> ExpertSlotTable::Score(int32_t slot) const {
  const int64_t id = id_of_[size_t(slot)];
  const double last = double(last_[size_t(slot)]);
  switch (policy_) {
    case EvictionPolicy::kLru:
      return {last, 0};
    case EvictionPolicy::kLfu:
      return {double(uses_[size_t(id)]), last};  // ties: least recent
    case EvictionPolicy::kLfru:
      // A slot loaded but not used yet ranks as one use at its load time.
      return {std::max(lfru_key_[size_t(id)], last / half_life_), last};
  }
  return {0, 0};
}

int32_t ExpertSlotTable::Claim(int64_t id, int64_t* evicted) {
  CHECK(slot_of_[size_t(id)] < 0);
  if (evicted) *evicted = -1;
  int32_t slot = -1;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    std::pair<double, double> best;
    for (int32_t s = 0; s < int32_t(id_of_.size()); ++s) {
      if (pins_[size_t(s)] > 0) continue;
      const std::pair<double, double> score = Score(s);
      if (slot < 0 || score < best) slot = s, best = score;
    }
    if (slot < 0) return -1;
    if (evicted) *evicted = id_of_[size_t(slot)];
    slot_of_[size_t(id_of_[size_t(slot)])] = -1;
  }
  id_of_[size_t(slot)] = id;
  slot_of_[size_t(id)] = slot;
  last_[size_t(slot)] = clock_;
  return slot;
}

void ExpertSlotTable::Touch(int32_t slot) {
  const int64_t id = id_of_[size_t(slot)];
  CHECK(id >= 0);
  ++clock_;
  last_[size_t(slot)] = clock_;
  ++uses_[size_t(id)];
  // key = log2(sum_i 2^(t_i / h)) in a form that never overflows: adding a
  // use at time t is log2(2^key + 2^(t/h)).
  const double now = double(clock_) / half_life_;
  double& key = lfru_key_[size_t(id)];
  const double hi = std::max(key, now), lo = std::min(key, now);
  key = hi + std::log2(1.0 + std::exp2(lo - hi));
}

void ExpertSlotTable::Pin(int32_t slot) {
  if (pins_[size_t(slot)]++ == 0) ++pinned_;
}

void ExpertSlotTable::Unpin(int32_t slot) {
  CHECK(pins_[size_t(slot)] > 0);
  if (--pins_[size_t(slot)] == 0) --pinned_;
}

void ExpertSlotTable::Free(int32_t slot) {
  const int64_t id = id_of_[size_t(slot)];
  if (id < 0) return;
  slot_of_[size_t(id)] = -1;
  id_of_[size_t(slot)] = -1;
  free_.push_back(slot);
}

}  // namespace anymoe
