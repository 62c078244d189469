// The Mixture-of-Experts feed-forward: an f32 router picks k experts per token
// (softmax, or sigmoid with a selection-only bias and group-limited top-k),
// tokens are grouped by expert and each chosen expert runs only on its own
// tokens, the weighted outputs are summed back, and the shared expert (if any)
// is added. Counts every selection for routing statistics.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "models/blocks/attention.h"
#include "models/blocks/dense_mlp.h"
#include "models/experts/expert_parallel.h"
#include "models/experts/streamed_experts.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class MoeBlock final : public FeedForwardBlock {
 public:
  // `ep`: run this layer's routed experts spread over the ranks of an MPI job
  // (the binder must prepare only this rank's); null: all here.
  static Expected<std::unique_ptr<MoeBlock>> Bind(WeightBinder& w, const ModelConfig& c,
                                                  int64_t layer, int64_t max_step_tokens,
                                                  const ExpertParallelism* ep = nullptr);
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override {
    AddNormed(ctx.backend, x, norm, y,
              [&](const Tensor& xn, const Tensor& out) { Forward(ctx, xn, out); });
  }
  void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) override {
    Forward(ctx, xn, out);
  }
  uint64_t workspace_floats(int64_t t) const override;

  // Tokens routed to each expert since load (or the last reset).
  const std::vector<int64_t>& expert_counts() const { return counts_; }
  void ResetCounts() { std::fill(counts_.begin(), counts_.end(), 0); }

  // Streaming (see models/experts/): where this layer's experts lie in the
  // file when the binder left them there (else null), and the cache that
  // supplies them.
  const LayerExperts* streamed_layout() const { return experts_.streamed() ? &layout_ : nullptr; }
  void AttachCache(ExpertCache* cache);
  // The next MoE layer and its feed-forward norm: while this layer's experts
  // run, the next layer's router applied to this layer's residual stream
  // predicts which experts to prefetch.
  void SetLookahead(MoeBlock* next, const Tensor& next_norm, float eps);
  // --sticky-experts: in single-token steps, when the router's margin (the
  // k-th best selection score minus the (k+1)-th) is below `threshold`, the
  // previous token's experts are used instead, weighted by this token's scores.
  Status EnableSticky(Backend& backend, float threshold);
  int64_t sticky_routings() const { return sticky_routings_; }

  // Live expert replacement (Model::ReplaceExpert): what new weights must be,
  // or why this layer's experts cannot be replaced.
  Expected<ReplaceableExperts> Replaceable() const;
  Status ReplaceExpert(Backend& backend, int64_t expert,
                       const std::array<TensorInfo, kExpertParts>& parts,
                       std::shared_ptr<const void> storage);

 private:
  MoeBlock(const ModelConfig& c) : c_(c) {}
  // x: the normed hidden state [T, H]; writes the block output [T, H] to `out`.
  void Forward(StepContext& ctx, const Tensor& x, const Tensor& out);
  // The next layer's experts for this step's rows, handed to the cache to prefetch.
  void PredictNext(StepContext& ctx);
  // Applies --sticky-experts to a one-token step's routing (ids_, weights_).
  void StickToPrevious(Backend& be, const Tensor& logits);
  // Groups the step's (token, expert) pairs by expert: rows_/scales_ hold each
  // expert's tokens and weights contiguously, starting at offsets_[e].
  void GroupByExpert(int64_t t);

  const ModelConfig& c_;
  std::string prefix_;  // "mlp" or Mixtral's "block_sparse_moe"
  Tensor router_;
  std::optional<Tensor> selection_bias_;
  // The kept experts' rows of the file's router and bias when pruned (the
  // tensors above may view them); empty otherwise.
  std::vector<uint8_t> router_rows_, bias_rows_;
  ExpertWeights experts_;
  std::unique_ptr<DenseMlp> shared_;
  RouterSpec spec_;
  // Per-step routing results and grouping, sized at load (no per-token allocation).
  std::vector<int32_t> ids_;
  std::vector<float> weights_;
  std::vector<int32_t> offsets_, rows_, cursor_;
  std::vector<float> scales_;
  std::vector<int64_t> counts_;

  int64_t layer_ = 0;
  LayerExperts layout_;  // when streamed
  ExpertCache* cache_ = nullptr;
  std::optional<StreamedExperts> streamed_;
  std::optional<ExpertParallelLayer> parallel_;
  bool overlap_exchange_ = true;  // the shared expert runs while parallel_'s exchange does
  MoeBlock* next_ = nullptr;
  Tensor next_norm_;
  float norm_eps_ = 0;
  std::vector<int32_t> predicted_ids_;
  std::vector<float> predicted_weights_;
  // --sticky-experts
  float sticky_threshold_ = 0;
  std::unique_ptr<Buffer> sticky_bias_buffer_;
  Tensor sticky_bias_;  // [E]: the selection bias plus a large value on the previous experts
  std::vector<float> host_logits_, host_bias_, host_selection_;
  std::vector<int32_t> previous_ids_;  // the last token's experts (empty: none yet)
  int64_t sticky_routings_ = 0;
  // The uploaded bytes replaced experts are prepared from (a backend may use
  // them in place), kept for the model's life.
  std::vector<std::shared_ptr<const void>> replaced_storage_;
  std::array<ExpertMatrix, kExpertParts> expert_parts_;  // what every expert's matrices are
  bool block_scaled_ = false;                             // FP8 with block scales
};

}  // namespace anymoe
