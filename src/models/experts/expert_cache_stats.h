// Counters of the expert cache since load, as /metrics, `anymoe bench` and
// --routing-stats report them (see expert_cache.h for what each counts).
#pragma once

#include <cstdint>
#include <string>

namespace anymoe {

struct ExpertCacheStats {
  bool enabled = false;
  std::string policy;
  bool prefetch = false;
  bool device = false;  // slots in device memory: bytes_read were uploaded into them
  int64_t slots = 0;
  uint64_t capacity_bytes = 0;  // memory of the slots
  uint64_t routed_bytes = 0;    // all routed experts of the model, in the file
  uint64_t tokens = 0;          // token rows that went through the model
  uint64_t lookups = 0;         // experts the steps used (per layer, per step)
  uint64_t hits = 0;            // ... already in the cache (loaded or loading)
  uint64_t misses = 0;          // ... whose load the step had to start
  uint64_t evictions = 0;
  uint64_t loads = 0;  // experts read (misses + prefetches)
  uint64_t bytes_read = 0;
  uint64_t read_errors = 0;
  uint64_t stall_ns = 0;           // time steps waited for expert loads
  uint64_t prefetches = 0;         // loads started ahead of need
  uint64_t prefetch_used = 0;      // ... whose expert a step then used
  uint64_t prefetch_skipped = 0;   // predicted, not cached, not read: the gate was closed
  uint64_t predicted = 0;          // (layer, expert) pairs the predictor named
  uint64_t predicted_used = 0;     // ... that the layer then used
  uint64_t predicted_lookups = 0;  // lookups of layers that had a prediction
  uint64_t sticky_tokens = 0;      // (token, layer) routings replaced by --sticky-experts
  uint64_t warm_loads = 0;         // experts a warm start (--expert-profile) read
  int64_t pinned = 0;              // slots pinned for good by it (--pin-experts)

  double hit_rate() const { return lookups ? double(hits) / double(lookups) : 0.0; }
  // Of the experts predicted, the share used (precision), and of the experts
  // used in predicted layers, the share predicted (recall).
  double prediction_precision() const {
    return predicted ? double(predicted_used) / double(predicted) : 0.0;
  }
  double prediction_recall() const {
    return predicted_lookups ? double(predicted_used) / double(predicted_lookups) : 0.0;
  }
  double bytes_per_token() const { return tokens ? double(bytes_read) / double(tokens) : 0.0; }
  double stall_ms_per_token() const {
    return tokens ? double(stall_ns) / 1e6 / double(tokens) : 0.0;
  }

  // The counters of `after` minus those of `before` (configuration from `after`).
  static ExpertCacheStats Delta(const ExpertCacheStats& after, const ExpertCacheStats& before) {
    ExpertCacheStats d = after;
    ForEachCounter(d, before, [](uint64_t& a, uint64_t b) { a -= b; });
    return d;
  }
  // Adds the counters of `other`.
  void Add(const ExpertCacheStats& other) {
    ForEachCounter(*this, other, [](uint64_t& a, uint64_t b) { a += b; });
  }

 private:
  template <typename F>
  static void ForEachCounter(ExpertCacheStats& d, const ExpertCacheStats& o, F f) {
    f(d.tokens, o.tokens);
    f(d.lookups, o.lookups);
    f(d.hits, o.hits);
    f(d.misses, o.misses);
    f(d.evictions, o.evictions);
    f(d.loads, o.loads);
    f(d.bytes_read, o.bytes_read);
    f(d.read_errors, o.read_errors);
    f(d.stall_ns, o.stall_ns);
    f(d.prefetches, o.prefetches);
    f(d.prefetch_used, o.prefetch_used);
    f(d.prefetch_skipped, o.prefetch_skipped);
    f(d.predicted, o.predicted);
    f(d.predicted_used, o.predicted_used);
    f(d.predicted_lookups, o.predicted_lookups);
    f(d.sticky_tokens, o.sticky_tokens);
    f(d.warm_loads, o.warm_loads);
  }
};

}  // namespace anymoe
