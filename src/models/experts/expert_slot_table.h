// The bookkeeping of an expert cache, without any bytes: which expert each of a
// fixed number of slots holds, which slots are pinned (in use by a step, or
// being loaded), and which one to evict for a newcomer under an eviction
// policy. The real cache (expert_cache.h) and the trace simulator
// (bench/cache_sim.h) share it, so a policy measured on traces is the one that runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anymoe {

enum class EvictionPolicy {
  kLru,   // least recently used
  kLfu,   // least frequently used since load (ties: least recent)
  kLfru,  // frequency decayed by recency (LRFU): sum over uses of 2^-(age / half-life)
};

std::string_view EvictionPolicyName(EvictionPolicy p);
std::optional<EvictionPolicy> ParseEvictionPolicy(std::string_view name);

class ExpertSlotTable {
 public:
  // LFRU's default half-life in slot counts: best of 1, 4, 8, 16 over the
  // traces measured (docs: SmolLM2-MoEfied and bench-model routing).
  static constexpr double kDefaultHalfLifeSlots = 8;
  // `ids`: experts that can be cached (MoE layers x experts per layer).
  // `half_life`: LFRU's, in uses of any expert (0: kDefaultHalfLifeSlots x slots).
  ExpertSlotTable(int64_t slots, int64_t ids, EvictionPolicy policy, double half_life = 0);

  int64_t slots() const { return int64_t(id_of_.size()); }
  EvictionPolicy policy() const { return policy_; }
  int32_t SlotOf(int64_t id) const { return slot_of_[size_t(id)]; }  // -1: not cached
  int64_t IdOf(int32_t slot) const { return id_of_[size_t(slot)]; }  // -1: free
  int pins(int32_t slot) const { return pins_[size_t(slot)]; }
  int64_t pinned_slots() const { return pinned_; }

  // A slot for `id`, which must not be cached: a free slot, else the policy's
  // victim among unpinned slots (its expert is dropped; `evicted` gets its
  // id). -1 when every slot is pinned.
  int32_t Claim(int64_t id, int64_t* evicted = nullptr);
  // A use of the expert in `slot` (recency and frequency).
  void Touch(int32_t slot);
  void Pin(int32_t slot);
  void Unpin(int32_t slot);
  // Forgets the expert in `slot` (a failed load): the slot is free again.
  void Free(int32_t slot);

 private:
  // Smaller is evicted first.
  std::pair<double, double> Score(int32_t slot) const;

  EvictionPolicy policy_;
  double half_life_;
  uint64_t clock_ = 0;  // uses so far
  int64_t pinned_ = 0;
  std::vector<int64_t> id_of_;    // [slots]
  std::vector<int32_t> slot_of_;  // [ids]
  std::vector<int> pins_;         // [slots]
  std::vector<uint64_t> last_;    // [slots]: clock of the last use or load
  std::vector<uint64_t> uses_;    // [ids]: LFU counts
  std::vector<double> lfru_key_;  // [ids]: log2(decayed count) + last use / half-life
  std::vector<int32_t> free_;     // free slots, taken from the back
};

}  // namespace anymoe
