// Looks up a model's weights by their HF-style name in its file (GGUF names are
// mapped, see tensor_names.h) and makes them usable by the backend, checking
// each shape against what the config implies. Every architecture binds its
// weights through this one place.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "distributed/expert_placement.h"
#include "models/experts/expert_layout.h"
#include "models/expert_subset.h"
#include "models/model_file.h"

namespace anymoe {

// The weights of every routed expert of one MoE layer, one view per expert,
// whatever the file layout (per-expert tensors, stacked [E, ...], fused gate_up).
// Streamed experts (WeightBinder::set_stream_experts) are not prepared: the
// views carry dtype and shape only (no bytes) and `spans` says where each
// expert's gate, up and down lie in the file. Under expert parallelism
// (WeightBinder::set_expert_placement) the experts another rank owns are
// views with dtype and shape only (no bytes), like streamed ones.
struct ExpertWeights {
  std::vector<Tensor> gate, up, down;  // gate/up [I, H], down [H, I]
  std::vector<ExpertSpans> spans;      // per expert when streamed, else empty
  // Streamed FP8 experts: each part's block scales from the expert's first
  // row (a slot holds only its rows); empty otherwise.
  std::vector<std::array<BlockScales, kExpertParts>> scales;

  bool streamed() const { return !spans.empty(); }
};

class WeightBinder {
 public:
  WeightBinder(const ModelFile& file, Backend& backend);

  bool is_gguf() const { return file_.format == ModelFormat::kGguf; }

  // The tensor `name` with exactly `shape` (outer-first); a clear error if it is
  // missing or shaped differently.
  Expected<Tensor> Require(const std::string& name, std::initializer_list<int64_t> shape);
  // Like Require, but absence is not an error.
  Expected<std::optional<Tensor>> Optional(const std::string& name,
                                           std::initializer_list<int64_t> shape);
  // Layer-relative forms: "self_attn.q_proj.weight" of layer `i`.
  Expected<Tensor> Layer(int64_t i, const std::string& suffix,
                         std::initializer_list<int64_t> shape);
  Expected<std::optional<Tensor>> OptionalLayer(int64_t i, const std::string& suffix,
                                                std::initializer_list<int64_t> shape);

  // Routed experts of layer `i` under `prefix` ("mlp.experts" or
  // "block_sparse_moe.experts"), with Mixtral's w1/w3/w2 names accepted too.
  // `num_experts` is the model's count: with an expert subset, the kept
  // experts of the file's, in the subset's order (the others never prepared).
  Expected<ExpertWeights> Experts(int64_t i, const std::string& prefix, int64_t num_experts,
                                  int64_t ffn, int64_t hidden);

  // A tensor of layer `i` with one row per routed expert (the router [E, H],
  // the selection bias [E]); `shape` has the model's E first. With an expert
  // subset, the kept experts' rows of the file's tensor, copied into
  // `storage` (which must outlive the tensor: a backend may use it in place).
  Expected<Tensor> LayerExpertRows(int64_t i, const std::string& suffix,
                                   std::initializer_list<int64_t> shape,
                                   std::vector<uint8_t>& storage);

  // The distinct (dtype, input width, routed expert or not) of the matrices
  // bound so far, streamed experts included: what the backend's
  // matmul scratch must hold (MatmulInput, with rows_per_token and groups 1).
  struct BoundMatrix {
    DType dtype = DType::kF32;
    int64_t in = 0;
    bool expert = false;
    bool operator==(const BoundMatrix&) const = default;
  };
  const std::vector<BoundMatrix>& matrices() const { return matrices_; }

  // Called with each prepared weight's bytes (load progress).
  void set_progress(std::function<void(uint64_t, bool)> progress) { progress_ = std::move(progress); }
  // Routed experts bound from now on stay in the file (see ExpertWeights).
  void set_stream_experts(bool stream) { stream_experts_ = stream; }
  // Routed experts bound from now on are kept on the host and run by the CPU
  // whatever the backend (Backend::PrepareCpuWeight; --cpu-moe).
  void set_cpu_experts(bool cpu) { cpu_experts_ = cpu; }
  // Expert parallelism: routed experts bound from now on are prepared only
  // when `placement` gives them to `rank` (null: every expert).
  void set_expert_placement(const ExpertPlacement* placement, int rank) {
    placement_ = placement;
    rank_ = rank;
  }

  // Expert pruning: layers bound from now on keep only `subset`'s experts
  // (null: all); it must outlive the binder.
  void set_expert_subset(const ExpertSubset* subset) { subset_ = subset; }

  uint64_t bound_bytes() const { return bound_bytes_; }      // prepared by the backend
  uint64_t streamed_bytes() const { return streamed_bytes_; }  // routed experts left in the file
  uint64_t remote_bytes() const { return remote_bytes_; }  // routed experts other ranks own
  uint64_t cpu_bytes() const { return cpu_bytes_; }  // routed experts kept on the host (in bound)

 private:
  std::string FileName(const std::string& hf_name) const;
  Expected<std::optional<Tensor>> Bind(const std::string& name, const std::vector<int64_t>& shape);
  // The file's experts of layer `i` that the model binds, in order: the
  // subset's, or all `num_experts`.
  std::vector<int32_t> BoundExperts(int64_t i, int64_t num_experts) const;
  // The file's count of experts per layer, for the model's `num_experts`.
  int64_t FileExperts(int64_t num_experts) const {
    return subset_ != nullptr ? subset_->file_experts : num_experts;
  }
  Expected<bool> PerExpert(int64_t i, const std::string& prefix, std::span<const int32_t> ids,
                           int64_t ffn, int64_t hidden, ExpertWeights& out);
  Expected<bool> Stacked(int64_t i, const std::string& prefix, int64_t file_experts,
                         std::span<const int32_t> ids, int64_t ffn, int64_t hidden,
                         ExpertWeights& out);
  // Whether this rank prepares expert `e` of layer `i` (see set_expert_placement).
  bool Owns(int64_t i, int64_t e) const;
  // The expert of another rank: `name` checked like Require, then a view with
  // dtype and shape but no bytes.
  Expected<Tensor> Remote(const std::string& name, std::initializer_list<int64_t> shape);
  // Rows [row0, +rows) of the matrix `info` (viewed as [rows, cols]) prepared
  // on their own: one expert of a stacked tensor.
  Expected<Tensor> PrepareRows(const TensorInfo& info, int64_t row0, int64_t rows);
  // Stacked experts under expert parallelism: each owned expert's slices alone.
  // Also a subset's experts alone (pruning), `ids` of the file's `num_experts`.
  Status StackedSlices(int64_t i, const std::string& base, bool fused, int64_t num_experts,
                       std::span<const int32_t> ids, int64_t ffn, int64_t hidden,
                       ExpertWeights& out);
  // The backend's PrepareWeight, or PrepareCpuWeight for routed experts under
  // set_cpu_experts.
  Expected<Tensor> Prepare(const TensorInfo& info);
  // Fills out.spans from the views (which then lose their bytes).
  Status LocateExperts(ExpertWeights& out);

  const ModelFile& file_;
  Backend& backend_;
  std::string gguf_arch_;
  uint64_t bound_bytes_ = 0;
  uint64_t streamed_bytes_ = 0;
  uint64_t remote_bytes_ = 0;
  uint64_t cpu_bytes_ = 0;
  const ExpertPlacement* placement_ = nullptr;
  const ExpertSubset* subset_ = nullptr;
  int rank_ = 0;
  bool stream_experts_ = false;
  bool binding_experts_ = false;  // inside Experts() with stream_experts_
  bool cpu_experts_ = false;
  bool in_experts_ = false;  // inside Experts()
  std::vector<BoundMatrix> matrices_;
  std::function<void(uint64_t, bool)> progress_;
};

}  // namespace anymoe
