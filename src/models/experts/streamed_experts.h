// Runs one MoE layer's routed experts out of the expert cache: acquires the
// experts the step routed to (as many as the cache can pin at once), and runs
// each group of them through gate/up, SwiGLU and down as soon as its bytes are
// in, so a miss waits only for its own expert while the others compute.
// Results are bitwise those of the resident path: each expert's rows go
// through the same kernels (a grouped matmul's rows do not depend on which
// other groups share the call), into the same rows of the output, and the
// caller scatters them back in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "core/function_ref.h"
#include "models/experts/expert_cache.h"

namespace anymoe {

class StreamedExperts {
 public:
  // `gate`, `up`, `down`: per expert, dtype and shape only (ExpertWeights of a
  // streamed layer); `layer`: the model layer, as the cache knows it.
  StreamedExperts(std::vector<Tensor> gate, std::vector<Tensor> up, std::vector<Tensor> down,
                  int64_t layer, ExpertCache* cache);

  // Rows [offsets[e], offsets[e+1]) of xe [M, H] through expert e into the same
  // rows of ye [M, H]; g and u [M, I] are scratch. `after_first_acquire` runs
  // once, when the step holds its first experts (the caller predicts and
  // prefetches the next layer's then). Errors when an expert cannot be read;
  // every pin is released either way.
  // GLM-5.3's SwiGLU clamp in every expert (0: none).
  void set_swiglu_limit(float limit) { swiglu_limit_ = limit; }
  Status Run(Backend& be, const Tensor& xe, std::span<const int32_t> offsets, const Tensor& g,
             const Tensor& u, const Tensor& ye, FunctionRef<void()> after_first_acquire);

 private:
  float swiglu_limit_ = 0;
  // Runs the ready experts active_[i] with ready_[i] set, in runs of experts
  // that are neighbours among the active ones (one grouped call per run).
  void RunReady(Backend& be, const Tensor& xe, std::span<const int32_t> offsets, const Tensor& g,
                const Tensor& u, const Tensor& ye, size_t begin, size_t end);

  std::vector<Tensor> gate_, up_, down_;  // per expert; the views of loaded slots when run
  int64_t layer_;
  ExpertCache* cache_;
  // Per step, sized at construction (no per-token allocation).
  std::vector<int32_t> active_;  // experts with rows, ascending
  std::vector<int32_t> slot_;    // [active]: the pinned slot, or -1
  std::vector<uint8_t> state_;   // [active]: 0 waiting, 1 ready now, 2 done
  std::vector<int32_t> pending_slots_;
  std::vector<uint8_t> pending_ready_;
  std::vector<size_t> pending_index_;
};

}  // namespace anymoe
