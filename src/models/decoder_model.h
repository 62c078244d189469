// The decoder-only transformer every supported architecture is an instance of:
// embedding, then per layer `x += Attn(RMSNorm(x))` and `x += FFN(RMSNorm(x))`
// with the attention block (GQA or MLA, +DSA; or GLM-5.3's KDA) and
// feed-forward block (dense or MoE) the config asks for, then the final norm
// and the output head. With mHC (hc_mult > 1, GLM-5.3) the residual is N
// streams: each sublayer reads their collapse and writes its output back
// through the layer's hyper-connections, and the final norm reads their mean.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "models/blocks/attention.h"
#include "models/blocks/hyper_connection.h"
#include "models/blocks/moe_block.h"
#include "models/model.h"
#include "models/mtp_block.h"
#include "models/rope.h"
#include "models/weight_binder.h"

namespace anymoe {

class DecoderModel final : public Model {
 public:
  static Expected<std::unique_ptr<Model>> Load(const ModelFile& file, ModelConfig config,
                                               Backend& backend, const LoadOptions& options);

  const ModelConfig& config() const override { return config_; }
  Backend& backend() override { return backend_; }
  using Model::NewPool;
  Expected<std::unique_ptr<KvPool>> NewPool(int64_t tokens, int64_t max_sequence) override;
  Expected<Tensor> ForwardBatch(std::span<const SequenceStep> steps) override;
  const MtpBlock* mtp() const override { return mtp_.get(); }
  Tensor last_hidden() const override { return hidden_; }
  Tensor last_embeddings() const override { return embeddings_; }
  Expected<std::unique_ptr<KvCache>> NewMtpCache(int64_t capacity) override;
  using Model::ForwardMtp;
  Expected<Tensor> ForwardMtp(std::span<const SequenceStep> steps, const Tensor& hidden) override;
  RoutingStats routing_stats() const override;
  void ResetRoutingStats() override;
  void SetObserver(const ForwardObserver* observer) override { observer_ = observer; }
  ExpertCache* expert_cache() override { return expert_cache_.get(); }
  Status SetIndexTopK(int64_t topk) override;
  Expected<ReplaceableExperts> ReplaceableExpertsOf(int64_t layer) const override;
  Status ReplaceExpert(int64_t layer, int64_t expert,
                       const std::array<TensorInfo, kExpertParts>& parts,
                       std::shared_ptr<const void> storage) override;

 private:
  // What the backend's per-op scratch grows with for sequences of up to
  // `max_keys` tokens: the attention shapes of the layers (and of the MTP
  // layer when `mtp`) and the DSA indexer's query shape.
  ContextShape context_shape(int64_t max_keys, bool mtp) const;
  struct Layer {
    Tensor attn_norm, ffn_norm;
    std::optional<HyperConnection> attn_hc, ffn_hc;  // mHC only
    std::unique_ptr<AttentionBlock> attention;
    std::unique_ptr<FeedForwardBlock> ffn;
    MoeBlock* moe = nullptr;  // `ffn` when it is a MoE block
  };

  bool pruned_ = false;  // loaded with an expert subset (--expert-prune)

  DecoderModel(ModelConfig config, Backend& backend)
      : config_(std::move(config)), backend_(backend) {}
  Status Bind(const ModelFile& file, const LoadOptions& options);
  Status BindMtp(WeightBinder& trunk, const LoadOptions& options);
  // Creates the expert cache for the streamed layers and wires prefetch.
  Status StartExpertCache(const ModelFile& file, const LoadOptions& options);
  Status BindLayer(WeightBinder& w, int64_t i);
  Status AllocateActivations();
  // Validates the steps and reserves their cache blocks; fills segments_.
  Status PlanStep(std::span<const SequenceStep> steps);
  // The context of a step of `t` rows that PlanStep planned.
  StepContext StartStep(int64_t t);
  // The mHC forward of a planned step of `t` rows (ForwardBatch's layers).
  void ForwardHyperConnected(StepContext& ctx, int64_t t);
  // Recurrent state (KDA): zeroes that of sequences starting now; errors when
  // a sequence's state does not cover exactly its cached tokens.
  Status CheckRecurrentState();
  bool hyper_connected() const { return config_.hc.mult > 1; }
  // The planned logit rows of the residual stream `x` through `norm` and
  // `head`; leaves those rows of `x` in hidden_.
  Tensor Logits(const Tensor& x, const Tensor& norm, float eps, const Tensor& head);
  // The planned embedding rows of `x` through the final norm, into embeddings_.
  void Embeddings(const Tensor& x);

  ModelConfig config_;
  Backend& backend_;
  DType kv_type_ = DType::kF32;  // of the GQA keys and values in its pools
  MlaForm mla_form_ = MlaForm::kAbsorbed;
  // 0, 1, ... up to the longest sequence the expanded MLA form has scratch for
  // (the key rows its layers attend); empty in the absorbed form.
  std::vector<int32_t> mla_key_order_;
  int64_t mla_expand_budget_ = kMlaExpandBudgetFloats;
  Tensor tok_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  std::unique_ptr<MtpBlock> mtp_;
  // The kinds of matrices bound (trunk and MTP layer): ContextShape::matmuls.
  std::vector<WeightBinder::BoundMatrix> matrices_;
  RopeFrequencies rope_freq_;
  RopeTable rope_;
  // The residual stream x, its normed copy, a block's output, and the logits,
  // [max_step_tokens, ...] each; block scratch lives in the workspace.
  std::unique_ptr<Buffer> stream_buffer_;
  Tensor x_, xn_, y_, logits_;
  // mHC: the streams [max_step_tokens, N H], each token's expand weights and
  // mixing matrix, and the all-ones weight of the streams' unweighted norm.
  std::unique_ptr<Buffer> hc_buffer_;
  Tensor streams_, hc_post_, hc_comb_, hc_ones_;
  Tensor hidden_;  // last_hidden(): rows of y_
  Tensor normed_;  // [max_step_tokens, hidden]: the final-normed rows embeddings_ views
  Tensor embeddings_;  // last_embeddings()
  Workspace workspace_;
  DsaSelection dsa_;
  int64_t loaded_topk_ = 0;  // config_.dsa.topk at load: what dsa_ is sized for
  std::vector<int32_t> positions_;
  std::vector<int32_t> step_ids_;  // the step's tokens, all sequences in row order
  std::vector<Segment> segments_;
  std::vector<int32_t> logit_rows_;  // rows of the step whose logits are returned
  std::vector<int32_t> embedding_rows_;  // rows of the steps that ask for embeddings
  const ForwardObserver* observer_ = nullptr;
  const ExpertParallelism* expert_parallel_ = nullptr;  // while binding
  std::unique_ptr<ExpertCache> expert_cache_;
  int64_t sticky_reported_ = 0;  // sticky routings already counted in the cache's stats
};

}  // namespace anymoe
