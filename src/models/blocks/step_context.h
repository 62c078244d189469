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
#include "core/status.h"
#include "models/kv_cache.h"
#include "models/workspace.h"

namespace anymoe {

// One MoE layer's routed experts of a step, as an expert profile measures
// them (runtime/expert_profile.h): the router's scores and, grouped by
// expert, each (token, expert) pair's combining weight and expert output.
// Views valid during the call only; read tensors through `backend`.
struct RoutedExpertOutputs {
  Backend& backend;
  int64_t layer = 0;
  int64_t tokens = 0;                 // T
  const Tensor& logits;               // [T, E] router logits (before any selection bias)
  RouterSpec::Scoring scoring;        // how the router turns logits into probabilities
  std::span<const int32_t> offsets;   // [E + 1]: expert e's pairs are [offsets[e], offsets[e+1])
  std::span<const int32_t> rows;      // [M]: each pair's token
  std::span<const float> weights;     // [M]: each pair's combining weight (as the sum uses it)
  const Tensor& outputs;              // [M, H]: each pair's expert output, before weighting
};

// Optional taps for tests and tools: the reference comparisons record which
// experts each token chose and which keys each DSA query kept; expert
// profiles read the routed experts' outputs.
struct ForwardObserver {
  // ids [T, k] of one MoE layer.
  std::function<void(int64_t layer, std::span<const int32_t> ids, int64_t k)> on_route;
  std::function<void(const RoutedExpertOutputs& routed)> on_expert_outputs;
  // keys [T, stride], counts [T] of one layer that ran (or reused) the indexer.
  std::function<void(int64_t layer, const KeySelection& selection)> on_key_selection;
};

// The rows of a step that belong to one sequence (batched steps have several).
struct Segment {
  int64_t row0 = 0;  // first row in the step's activations
  int64_t rows = 0;  // new tokens of this sequence
  KvCache* cache = nullptr;
  int64_t n_past = 0;  // tokens already in its cache
  bool token_by_token = false;  // Model::SequenceStep::token_by_token
  // Pool rows of the new tokens.
  std::span<const int32_t> new_rows() const {
    return cache->rows().subspan(size_t(n_past), size_t(rows));
  }
};

struct DsaSelection {
  std::vector<int32_t> keys;    // [max_step_tokens, topk]
  std::vector<int32_t> counts;  // [max_step_tokens]
  int64_t stride = 0;
  bool valid = false;  // set by a "full" layer in this step
  KeySelection View() const { return KeySelection{keys, counts, stride}; }
  // The rows of one segment.
  KeySelection View(const Segment& s) const {
    return KeySelection{std::span(keys).subspan(size_t(s.row0 * stride), size_t(s.rows * stride)),
                        std::span(counts).subspan(size_t(s.row0), size_t(s.rows)), stride};
  }
};

struct StepContext {
  Backend& backend;
  Workspace& ws;
  int64_t layer = 0;
  int64_t t = 0;  // rows in this step, all sequences together
  std::span<const Segment> segments = {};
  std::span<const int32_t> positions = {};  // [t]: each row's position in its sequence
  DsaSelection* dsa = nullptr;
  const ForwardObserver* observer = nullptr;
  // The residual stream before this layer's feed-forward norm [t, hidden]:
  // what a MoE block predicts the next MoE layer's experts from.
  const Tensor* residual = nullptr;
  // A block that cannot finish the step (an expert failed to load) sets this;
  // the step then fails and its tokens are not committed.
  Status status = Status::Ok();
};

}  // namespace anymoe
