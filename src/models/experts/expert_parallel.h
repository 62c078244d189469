// Expert parallelism for one MoE layer (docs/distributed.md): every rank holds
// the whole step's rows and routing (replicated), runs only the experts it
// owns on their rows, and an all-gather hands every rank every expert's output
// rows in the single-process order, so the weighted sum that follows is the
// single-process one, bit for bit. The exchange runs while the caller computes
// the shared expert. On a device backend with a device exchange (NCCL between
// CUDA ranks, joined by the engine) the rows stay on the devices; on another
// device backend they travel through host memory: this rank's output rows are
// read back into a host copy of the gathered buffer, MPI exchanges that, and
// the whole buffer is written back before the rows are put in order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "models/workspace.h"

namespace anymoe {

// What a model loads and runs under expert parallelism (LoadOptions).
struct ExpertParallelism {
  Communicator* comm = nullptr;
  ExpertPlacement placement;
  // The shared expert computes while the routed outputs travel (false: after
  // they are back; the same bits either way, to measure what overlap gains).
  bool overlap = true;
};

class ExpertParallelLayer {
 public:
  // `owners`: the rank of each expert of this layer; `max_pairs`: the most
  // (token, expert) pairs of a step.
  ExpertParallelLayer(Communicator& comm, std::span<const int32_t> owners, int64_t max_pairs);

  // Workspace floats Run takes for `pairs` rows of width `hidden`.
  static uint64_t WorkspaceFloats(int64_t pairs, int64_t hidden);
  // GLM-5.3's SwiGLU clamp in every expert (0: none).
  void set_swiglu_limit(float limit) { swiglu_limit_ = limit; }

  // xe: the step's gathered rows [M, H], grouped by expert at `offsets` (every
  // expert, single-process order); gate/up/down: the experts (others' without
  // bytes); g, u: scratch [M, I]. Runs this rank's experts and starts the
  // exchange of every rank's output rows; the caller may compute meanwhile
  // (not touching `ws`'s buffers taken here), then Finish writes every
  // expert's output rows to `ye` [M, H] in the order of `xe`.
  Status Start(Backend& be, Workspace& ws, const Tensor& xe, std::span<const int32_t> offsets,
               std::span<const Tensor> gate, std::span<const Tensor> up,
               std::span<const Tensor> down, const Tensor& g, const Tensor& u);
  Status Finish(Backend& be, const Tensor& ye);

 private:
  float swiglu_limit_ = 0;
  Communicator& comm_;
  std::vector<int32_t> owners_;
  // Per step, sized at load: this rank's rows of xe and its group offsets, and
  // for every row of xe its position in the all-gathered buffer.
  std::vector<int32_t> local_rows_, local_offsets_, position_;
  std::vector<int> counts_, displs_, cursor_;
  Tensor gathered_;  // every rank's output rows, rank-major, while the exchange runs
  int64_t rows_ = 0;
  // How this step's rows travel: MPI in place (the CPU backend's tensors are
  // host memory), MPI through a host copy, or the backend's device exchange.
  enum class Path { kInPlace, kHostCopy, kDevice };
  Path path_ = Path::kInPlace;
  // kHostCopy: the host copy of `gathered_` (grown to the largest step's rows).
  std::vector<float> host_gathered_;
};

}  // namespace anymoe
