#include "models/experts/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/mapped_file.h"

namespace anymoe {
namespace {

uint64_t SlotFootprint(const std::array<uint64_t, kExpertParts>& parts) {
  uint64_t bytes = 0;
  for (uint64_t p : parts) {
    bytes += (ExpertReader::Capacity(p) + ExpertReader::kAlign - 1) / ExpertReader::kAlign *
             ExpertReader::kAlign;
  }
  return bytes;
}

// The largest gate, up and down of any layer: every slot can take any expert.
// Device slots also hold each part's FP8 block scales (DeviceSlotPartBytes).
std::array<uint64_t, kExpertParts> LargestParts(std::span<const LayerExperts* const> layers,
                                                bool device_slots) {
  std::array<uint64_t, kExpertParts> parts{};
  for (const LayerExperts* l : layers) {
    if (l == nullptr) continue;
    for (int p = 0; p < kExpertParts; ++p) {
      const ExpertMatrix& m = l->parts[size_t(p)];
      parts[size_t(p)] =
          std::max(parts[size_t(p)], device_slots ? DeviceSlotPartBytes(m) : m.bytes);
    }
  }
  return parts;
}

}  // namespace

Expected<ExpertCache::Footprint> ExpertCache::Plan(std::span<const LayerExperts* const> layers,
                                                   const ExpertCacheOptions& options) {
  Footprint f;
  int64_t ids = 0;
  for (const LayerExperts* l : layers) {
    if (l == nullptr) continue;
    ids += l->num_experts();
    f.routed_bytes += uint64_t(l->num_experts()) * l->expert_bytes();
  }
  if (ids == 0) return Status::Error("expert cache: the model has no routed experts to stream");
  const auto parts = LargestParts(layers, options.device_slots);
  f.slot_bytes = options.device_slots ? DeviceSlotBytes(parts) : SlotFootprint(parts);
  f.slots = options.slots > 0      ? options.slots
            : options.fraction > 0 ? int64_t(std::ceil(options.fraction * double(ids)))
                                   : int64_t(options.bytes / f.slot_bytes);
  if (f.slots < 1) {
    return Status::Error(std::string(options.device_slots ? "device " : "") + "expert cache of " +
                         std::to_string(options.bytes) +
                         " bytes holds no expert: the minimum is one expert, " +
                         std::to_string(f.slot_bytes) + " bytes (" +
                         (options.device_slots ? "--mem-budget or " : "") + "--expert-cache)");
  }
  f.slots = std::min(f.slots, ids);  // more slots than experts would stay empty
  const uint64_t staging = options.pack_panels && !options.device_slots
                               ? uint64_t(options.io_threads) * (f.slot_bytes / kExpertParts + 1)
                               : 0;
  f.bytes = uint64_t(f.slots) * f.slot_bytes + staging;
  return f;
}

Expected<std::unique_ptr<ExpertCache>> ExpertCache::Create(
    const ModelFile& file, std::span<const LayerExperts* const> layers,
    const ExpertCacheOptions& options, Backend* backend) {
  ASSIGN_OR_RETURN(Footprint f, Plan(layers, options));
  if (options.device_slots) {
    if (backend == nullptr) return Status::Error("expert cache: device slots need a backend");
    // Slots hold the file's bytes on the device only: its kernels must run them.
    const SupportsFn supports = DeviceSupportsTable(backend->name());
    for (const LayerExperts* l : layers) {
      for (int p = 0; l != nullptr && p < kExpertParts; ++p) {
        const DType d = l->parts[size_t(p)].dtype;
        if (supports != nullptr && !supports(Op::kGroupedMatmul, d)) {
          return Status::Error(backend->name() + ": no GroupedMatmul kernel for " +
                               std::string(Name(d)) +
                               " experts, so they cannot live in a device expert cache: use "
                               "--cpu-moe, or a --mem-budget that holds every weight");
        }
      }
    }
  }
  int64_t ids = 0;
  for (const LayerExperts* l : layers) ids += l ? l->num_experts() : 0;
  std::unique_ptr<ExpertCache> c(new ExpertCache(options, f.slots, ids));
  c->options_.io_threads = std::max(1, options.io_threads);
  c->layers_.resize(layers.size());
  c->id_base_.assign(layers.size(), -1);
  c->prefetch_pins_.resize(layers.size());
  c->predicted_.resize(layers.size());
  c->candidates_.resize(layers.size());
  c->gate_ = PrefetchGate(options.prefetch_min_use);
  int64_t base = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] == nullptr) continue;
    c->layers_[i] = *layers[i];
    c->id_base_[i] = base;
    for (int32_t e = 0; e < int32_t(layers[i]->num_experts()); ++e) {
      c->expert_of_.emplace_back(int64_t(i), e);
    }
    base += layers[i]->num_experts();
  }
  std::vector<std::string> paths;
  for (const MappedFile* m : file.mapped_files()) paths.push_back(m->path());
  ASSIGN_OR_RETURN(c->reader_, ExpertReader::Open(paths, options.direct_io, options.fault_hook));
  if (options.device_slots) {
    ASSIGN_OR_RETURN(c->store_, NewDeviceExpertSlots(*backend, f.slots, LargestParts(layers, true),
                                                     c->options_.io_threads));
  } else {
    ASSIGN_OR_RETURN(c->store_, NewHostExpertSlots(f.slots, LargestParts(layers, false),
                                                   options.pack_panels, c->options_.io_threads));
  }
  c->views_.resize(size_t(f.slots));
  c->state_.assign(size_t(f.slots), State::kEmpty);
  c->error_.assign(size_t(f.slots), Status::Ok());
  c->parts_taken_.assign(size_t(f.slots), 0);
  c->parts_done_.assign(size_t(f.slots), 0);
  c->prefetched_.assign(size_t(f.slots), 0);
  c->prefetch_pinned_.assign(size_t(f.slots), 0);
  c->warming_.assign(size_t(f.slots), 0);
  c->warm_pinned_.assign(size_t(f.slots), 0);
  c->stats_.enabled = true;
  c->stats_.policy = std::string(EvictionPolicyName(options.policy));
  c->stats_.prefetch = options.prefetch;
  c->stats_.device = options.device_slots;
  c->stats_.slots = f.slots;
  c->stats_.capacity_bytes = c->store_->bytes();
  c->stats_.routed_bytes = f.routed_bytes;
  for (int w = 0; w < c->options_.io_threads; ++w) {
    c->threads_.emplace_back([p = c.get(), w] { p->Worker(w); });
  }
  return c;
}

ExpertCache::~ExpertCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int32_t ExpertCache::Acquire(int64_t layer, int32_t expert) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t id = Id(layer, expert);
  int32_t s = table_.SlotOf(id);
  if (s >= 0) {
    ++stats_.hits;
    if (PartsLeft(s)) {  // jump the prefetches
      demand_.push_back(s);
      work_.notify_one();
    }
    if (prefetched_[size_t(s)]) {
      prefetched_[size_t(s)] = 0;
      ++stats_.prefetch_used;
    }
  } else {
    int64_t evicted = -1;
    // Every unpinned slot may still be loading: wait for one to come in.
    while ((s = table_.Claim(id, &evicted)) < 0) {
      if (in_flight_ == 0) return -1;  // all pinned by steps: the caller releases some
      loaded_.wait(lock);
      if ((s = table_.SlotOf(id)) >= 0) break;  // a prefetch brought it meanwhile
    }
    if (state_[size_t(s)] == State::kEmpty || evicted >= 0) {
      if (evicted >= 0) ++stats_.evictions;
      prefetched_[size_t(s)] = 0;
      ++stats_.misses;
      Queue(s);
      table_.Pin(s);  // the load's pin
      ++in_flight_;
      demand_.push_back(s);
      work_.notify_one();
    } else {
      ++stats_.hits;
    }
  }
  ++stats_.lookups;
  if (auto& candidates = candidates_[size_t(layer)];
      !candidates.empty() && candidates[size_t(expert)] == 1) {
    candidates[size_t(expert)] = 2;
  }
  const auto& predicted = predicted_[size_t(layer)];
  if (!predicted.empty()) {
    ++stats_.predicted_lookups;
    stats_.predicted_used += predicted[size_t(expert)];
  }
  table_.Pin(s);
  table_.Touch(s);
  return s;
}

Status ExpertCache::WaitAny(std::span<const int32_t> slots, std::span<uint8_t> ready) {
  std::unique_lock<std::mutex> lock(mu_);
  std::chrono::steady_clock::time_point start;
  bool waited = false;
  for (;;) {
    int n = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      const State st = state_[size_t(slots[i])];
      if (st == State::kFailed) return error_[size_t(slots[i])];
      ready[i] = st == State::kReady;
      n += ready[i];
    }
    if (n > 0 || slots.empty()) break;
    if (!waited) start = std::chrono::steady_clock::now(), waited = true;
    loaded_.wait(lock);
  }
  if (waited) {
    stats_.stall_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count());
  }
  return Status::Ok();
}

void ExpertCache::Queue(int32_t s) {
  state_[size_t(s)] = State::kQueued;
  parts_taken_[size_t(s)] = 0;
  parts_done_[size_t(s)] = 0;
  error_[size_t(s)] = Status::Ok();  // the parts' first error is kept from here
}

void ExpertCache::FreeIfUnused(int32_t s) {
  if (state_[size_t(s)] == State::kFailed && table_.pins(s) == 0) {
    table_.Free(s);
    state_[size_t(s)] = State::kEmpty;  // its error stays until Queue starts a new load
  }
}

void ExpertCache::Release(int32_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.Unpin(s);
  FreeIfUnused(s);
}

void ExpertCache::JudgeCandidates(int64_t layer) {
  auto& candidates = candidates_[size_t(layer)];
  const auto n = uint64_t(
      std::count_if(candidates.begin(), candidates.end(), [](uint8_t c) { return c != 0; }));
  gate_.Record(n, uint64_t(std::count(candidates.begin(), candidates.end(), uint8_t(2))));
  candidates.clear();
}

void ExpertCache::Prefetch(int64_t layer, std::span<const int32_t> experts) {
  std::lock_guard<std::mutex> lock(mu_);
  JudgeCandidates(layer);
  const bool read_ahead = gate_.open();
  const size_t n_experts = size_t(layers_[size_t(layer)].num_experts());
  auto& predicted = predicted_[size_t(layer)];
  predicted.assign(n_experts, 0);
  auto& candidates = candidates_[size_t(layer)];
  candidates.assign(n_experts, 0);
  auto& pins = prefetch_pins_[size_t(layer)];
  for (int32_t e : experts) {
    if (predicted[size_t(e)]) continue;
    predicted[size_t(e)] = 1;
    ++stats_.predicted;
    const int64_t id = Id(layer, e);
    int32_t s = table_.SlotOf(id);
    // Half the slots a warm start left unpinned stay free of prefetches, for
    // the steps' own misses.
    const bool room = table_.pinned_slots() - warm_.pinned < (table_.slots() - warm_.pinned) / 2;
    if (s < 0) {
      candidates[size_t(e)] = 1;  // judged by the gate whether read or not
      if (!read_ahead) {
        ++stats_.prefetch_skipped;
        continue;
      }
      if (!room) continue;
      int64_t evicted = -1;
      s = table_.Claim(id, &evicted);
      if (s < 0) continue;
      if (evicted >= 0) ++stats_.evictions;
      Queue(s);
      prefetched_[size_t(s)] = 1;
      ++stats_.prefetches;
      table_.Pin(s);  // the load's pin
      ++in_flight_;
      ahead_.push_back(s);
      work_.notify_one();
    }
    // Keep it until its layer runs.
    if (!prefetch_pinned_[size_t(s)] && (table_.pins(s) > 0 || room)) {
      table_.Pin(s);
      prefetch_pinned_[size_t(s)] = 1;
      pins.push_back(s);
    }
  }
}

void ExpertCache::ReleasePrefetch(int64_t layer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int32_t s : prefetch_pins_[size_t(layer)]) {
    prefetch_pinned_[size_t(s)] = 0;
    table_.Unpin(s);
    FreeIfUnused(s);
  }
  prefetch_pins_[size_t(layer)].clear();
  predicted_[size_t(layer)].clear();
}

bool ExpertCache::PartsLeft(int32_t s) const {
  const State st = state_[size_t(s)];
  return (st == State::kQueued || st == State::kLoading) && parts_taken_[size_t(s)] < kExpertParts;
}

void ExpertCache::Worker(int index) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !demand_.empty() || !ahead_.empty(); });
    if (stop_) return;
    auto& queue = !demand_.empty() ? demand_ : ahead_;
    const int32_t s = queue.front();
    if (!PartsLeft(s)) {  // queued twice (promoted): taken
      queue.pop_front();
      continue;
    }
    // One matrix of the expert per worker, so the parts' reads overlap each
    // other and each part's packing overlaps the next one's read.
    const int part = parts_taken_[size_t(s)]++;
    if (parts_taken_[size_t(s)] == kExpertParts) queue.pop_front();
    state_[size_t(s)] = State::kLoading;
    const int64_t id = table_.IdOf(s);
    lock.unlock();
    LoadPart(s, id, part, index);
    lock.lock();
  }
}

void ExpertCache::LoadPart(int32_t s, int64_t id, int part, int worker) {
  const auto [layer, expert] = expert_of_[size_t(id)];
  const LayerExperts& l = layers_[size_t(layer)];
  const FileSpan& span = l.spans[size_t(expert)][size_t(part)];
  uint64_t shift = 0;
  Status status = reader_->Read(span, store_->ReadBuffer(s, part, worker), &shift);
  Tensor view;
  if (status.ok()) {
    const BlockScales scales =
        l.scales.empty() ? BlockScales{} : l.scales[size_t(expert)][size_t(part)];
    view = store_->Commit(s, part, l.parts[size_t(part)], scales, shift, worker);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    views_[size_t(s)][size_t(part)] = view;
    if (!status.ok() && error_[size_t(s)].ok()) error_[size_t(s)] = status;
    if (++parts_done_[size_t(s)] < kExpertParts) return;
    if (warming_[size_t(s)]) {
      warming_[size_t(s)] = 0;
      ++warm_.done;
    }
    if (!error_[size_t(s)].ok() && warm_pinned_[size_t(s)]) {
      // A failed read keeps no slot: a later step reads the expert again.
      warm_pinned_[size_t(s)] = 0;
      --warm_.pinned;
      table_.Unpin(s);
    }
    if (error_[size_t(s)].ok()) {
      state_[size_t(s)] = State::kReady;
      ++stats_.loads;
      for (const FileSpan& read : l.spans[size_t(expert)]) stats_.bytes_read += read.bytes;
    } else {
      state_[size_t(s)] = State::kFailed;
      ++stats_.read_errors;
    }
    --in_flight_;
    table_.Unpin(s);
    FreeIfUnused(s);
  }
  loaded_.notify_all();
}

int64_t ExpertCache::Warm(std::span<const ExpertRef> experts, int64_t pin) {
  std::lock_guard<std::mutex> lock(mu_);
  pin = std::min(pin, table_.slots() / 2);
  int64_t queued = 0;
  for (const ExpertRef& x : experts) {
    if (x.layer < 0 || x.layer >= int64_t(layers_.size()) || id_base_[size_t(x.layer)] < 0 ||
        x.expert < 0 || x.expert >= int32_t(layers_[size_t(x.layer)].num_experts())) {
      continue;
    }
    const int64_t id = Id(x.layer, x.expert);
    int32_t s = table_.SlotOf(id);
    if (s < 0) {
      if (queued >= table_.slots()) break;  // the cache is full of the list's experts
      int64_t evicted = -1;
      s = table_.Claim(id, &evicted);
      if (s < 0) break;  // every slot held
      if (evicted >= 0) ++stats_.evictions;
      Queue(s);
      prefetched_[size_t(s)] = 0;
      warming_[size_t(s)] = 1;
      table_.Pin(s);  // the load's pin
      ++in_flight_;
      ++queued;
      ++warm_.queued;
      ahead_.push_back(s);
    }
    if (warm_.pinned < pin && !warm_pinned_[size_t(s)]) {
      table_.Pin(s);
      warm_pinned_[size_t(s)] = 1;
      ++warm_.pinned;
    }
  }
  work_.notify_all();
  return queued;
}

ExpertCache::WarmProgress ExpertCache::warm_progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warm_;
}

bool ExpertCache::IsCached(int64_t layer, int32_t expert) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (layer < 0 || layer >= int64_t(layers_.size()) || id_base_[size_t(layer)] < 0) return false;
  return table_.SlotOf(Id(layer, expert)) >= 0;
}

void ExpertCache::CountTokens(int64_t t, int64_t sticky) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.tokens += uint64_t(t);
  stats_.sticky_tokens += uint64_t(sticky);
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ExpertCacheStats s = stats_;
  s.pinned = warm_.pinned;
  s.warm_loads = uint64_t(warm_.done);
  return s;
}

}  // namespace anymoe
