// The routed-expert cache: experts stay in the model file and are read on
// demand into a fixed number of slots (host memory on the CPU), with an
// eviction policy (expert_slot_table.h), background I/O threads that load
// misses ahead of prefetches, and prefetch of the experts a predictor expects
// the next layer to use. Everything else of the model stays resident. The I/O
// threads take an expert's gate, up and down as three jobs, so the reads of
// one miss overlap and packing one matrix overlaps reading the next.
//
// The step that uses an expert pins its slot (Acquire) until it has run it
// (Release): a pinned slot is never evicted. A miss waits only for its own
// expert (WaitAny returns as soon as any of a step's experts is in), and when
// every slot is pinned Acquire says so, so a cache smaller than one layer's
// experts still works: the caller runs what it holds, releases, asks again.
// A failed read (I/O error, the file shrank) fails the steps that need that
// expert with a Status; the slot is freed and a later step reads it again.
//
// A warm start (Warm) fills the cache from an expert profile before any step
// asks, below the steps' own misses, and may pin the first experts of its
// list for the cache's life.
//
// Called from the model's thread only (one step at a time), except
// warm_progress() and IsCached(), which any thread may call; the I/O threads
// are internal.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/experts/expert_cache_stats.h"
#include "models/experts/expert_layout.h"
#include "models/experts/expert_reader.h"
#include "models/experts/expert_slot_store.h"
#include "models/experts/expert_slot_table.h"
#include "models/experts/prefetch_gate.h"
#include "models/model_file.h"

namespace anymoe {

struct ExpertCacheOptions {
  bool enabled = false;  // stream routed experts through the cache
  uint64_t bytes = 0;    // slot memory (experts of up to this many bytes in all)
  int64_t slots = 0;     // > 0: exactly this many slots (tests), whatever `bytes` says
  double fraction = 0;   // > 0: slots for this share of all routed experts (--expert-cache 25%)
  EvictionPolicy policy = EvictionPolicy::kLfru;  // the best measured (ExpertSlotTable)
  double half_life = 0;                           // LFRU (see ExpertSlotTable)
  bool prefetch = true;  // load the predicted experts of the next layer ahead
  // ... while at least this share of such loads was used lately (PrefetchGate;
  // 0: always, above 1: never once the gate has seen enough to judge).
  double prefetch_min_use = PrefetchGate::kDefaultMinUse;
  int io_threads = 2;
  bool pack_panels = false;  // CPU: slots in the VNNI panel layout (see NewHostExpertSlots)
  // Slots in the device's memory (a device backend's hot-expert cache, sized
  // from what --mem-budget leaves; NewDeviceExpertSlots): `bytes` is device memory.
  bool device_slots = false;
  bool direct_io = true;                         // O_DIRECT where the file system allows it
  ExpertReader::FaultHook fault_hook = nullptr;  // tests
};

// One routed expert of the model: its layer (the model layer index) and expert.
struct ExpertRef {
  int64_t layer = 0;
  int32_t expert = 0;
};

class ExpertCache {
 public:
  using Views = std::array<Tensor, kExpertParts>;  // gate, up, down

  // `layers[i]`: the streamed experts of model layer i (null: none). Errors
  // when the options leave no room for one expert, naming the minimum size.
  // `backend`: where device slots live (options.device_slots).
  static Expected<std::unique_ptr<ExpertCache>> Create(const ModelFile& file,
                                                       std::span<const LayerExperts* const> layers,
                                                       const ExpertCacheOptions& options,
                                                       Backend* backend = nullptr);
  // Slots and memory `options` give for these layers (without allocating).
  struct Footprint {
    int64_t slots = 0;
    uint64_t slot_bytes = 0;  // memory per slot, alignment slack included
    uint64_t bytes = 0;       // all slots (and staging); device memory with device_slots
    uint64_t routed_bytes = 0;
  };
  static Expected<Footprint> Plan(std::span<const LayerExperts* const> layers,
                                  const ExpertCacheOptions& options);
  ~ExpertCache();

  // The step API (see the header comment). `layer` is the model layer.
  int32_t Acquire(int64_t layer, int32_t expert);
  Status WaitAny(std::span<const int32_t> slots, std::span<uint8_t> ready);
  const Views& View(int32_t slot) const { return views_[size_t(slot)]; }
  void Release(int32_t slot);
  // Loads `experts` of `layer` ahead of its step and keeps them (and those of
  // them already cached) until ReleasePrefetch(layer), within half the slots.
  // Those not cached are read only while the PrefetchGate is open, i.e. while
  // enough of such reads were used lately.
  void Prefetch(int64_t layer, std::span<const int32_t> experts);
  void ReleasePrefetch(int64_t layer);
  bool prefetch_enabled() const { return options_.prefetch; }

  // Warm start: queues reads of `experts` (most wanted first; those of layers
  // not streamed are skipped) into free slots, or slots no step holds, up to
  // the cache's size, behind any step's misses; the first `pin` of them that
  // get a slot stay pinned (never evicted) for the cache's life, at most half
  // the slots so that steps and prefetches keep room. Returns how many reads
  // were queued; progress in warm_progress(). Call once, before or between steps.
  int64_t Warm(std::span<const ExpertRef> experts, int64_t pin);
  struct WarmProgress {
    int64_t queued = 0, done = 0;  // done: loaded or failed
    int64_t pinned = 0;
  };
  WarmProgress warm_progress() const;
  bool IsCached(int64_t layer, int32_t expert) const;  // loaded or loading

  void CountTokens(int64_t t, int64_t sticky);
  ExpertCacheStats stats() const;
  int64_t slots() const { return table_.slots(); }

 private:
  enum class State : uint8_t { kEmpty, kQueued, kLoading, kReady, kFailed };
  ExpertCache(const ExpertCacheOptions& options, int64_t slots, int64_t ids)
      : options_(options), table_(slots, ids, options.policy, options.half_life) {}
  int64_t Id(int64_t layer, int32_t expert) const { return id_base_[size_t(layer)] + expert; }
  void Worker(int index);
  // Reads and commits matrix `part` of expert `id` into `slot`; the last part
  // to finish makes the slot ready (or failed).
  void LoadPart(int32_t slot, int64_t id, int part, int worker);
  void Queue(int32_t slot);            // under mu_: a load of the slot's new expert
  bool PartsLeft(int32_t slot) const;  // under mu_: queued or loading, a part not taken
  void FreeIfUnused(int32_t slot);     // under mu_: a failed slot nobody holds
  // Under mu_: gives the gate what became of `layer`'s last candidates.
  void JudgeCandidates(int64_t layer);

  ExpertCacheOptions options_;
  std::vector<LayerExperts> layers_;                    // by model layer (empty: not streamed)
  std::vector<int64_t> id_base_;                        // by model layer
  std::vector<std::pair<int64_t, int32_t>> expert_of_;  // id -> (layer, expert)
  std::unique_ptr<ExpertReader> reader_;
  std::unique_ptr<ExpertSlotStore> store_;
  std::vector<Views> views_;

  mutable std::mutex mu_;
  std::condition_variable loaded_;  // a load finished
  std::condition_variable work_;    // a load was queued, or stop
  ExpertSlotTable table_;
  std::vector<State> state_;
  std::vector<Status> error_;  // the first failed part's
  // Per slot, of the load in flight: parts a worker took, parts finished.
  std::vector<uint8_t> parts_taken_, parts_done_;
  std::vector<uint8_t> prefetched_;       // loaded ahead and not used yet
  std::vector<uint8_t> prefetch_pinned_;  // held by Prefetch until its layer runs
  std::vector<uint8_t> warming_;          // a warm start's read in flight
  std::vector<uint8_t> warm_pinned_;      // pinned by the warm start for good
  WarmProgress warm_;
  std::deque<int32_t> demand_, ahead_;
  int64_t in_flight_ = 0;                            // slots queued or loading
  std::vector<std::vector<int32_t>> prefetch_pins_;  // by model layer
  std::vector<std::vector<uint8_t>> predicted_;      // by model layer: [experts] or empty
  // The gate's evidence, by model layer: [experts] of the last prediction,
  // 1 for a candidate (predicted, not cached then), 2 once the layer used it;
  // judged at the layer's next prediction, after all of the step's waves.
  std::vector<std::vector<uint8_t>> candidates_;
  PrefetchGate gate_;
  ExpertCacheStats stats_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace anymoe
