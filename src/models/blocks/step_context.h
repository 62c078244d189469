// What every block of a decoder layer sees during one forward step: the
// backend, scratch, the sequence's cache, where the new tokens sit, and state
// threaded from layer to layer (the DSA key selection that shared-indexer
// layers reuse).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "models/kv_cache.h"
#include "models/workspace.h"

namespace anymoe {

// Optional taps for tests and tools: the reference comparisons record which
// experts each token chose and which keys each DSA query kept.
struct ForwardObserver {
  // ids [T, k] of one MoE layer.
  std::function<void(int64_t layer, std::span<const int32_t> ids, int64_t k)> on_route;
  // keys [T, stride], counts [T] of one layer that ran (or reused) the indexer.
  std::function<void(int64_t layer, const KeySelection& selection)> on_key_selection;
};

struct DsaSelection {
  std::vector<int32_t> keys;    // [max_step_tokens, topk]
  std::vector<int32_t> counts;  // [max_step_tokens]
  int64_t stride = 0;
  bool valid = false;  // set by a "full" layer in this step
  KeySelection View() const { return KeySelection{keys, counts, stride}; }
};

struct StepContext {
  Backend& backend;
  Workspace& ws;
  KvCache& cache;
  int64_t layer = 0;
  int64_t t = 0;       // tokens in this step
  int64_t n_past = 0;  // tokens already in the cache
  std::span<const int32_t> positions;
  DsaSelection* dsa = nullptr;
  const ForwardObserver* observer = nullptr;
};

}  // namespace anymoe
