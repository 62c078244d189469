// Grouped-query attention with RoPE (half-split or interleaved, full or
// partial), optional q/k/v biases and optional per-head q/k RMSNorm (applied
// after the bias, before RoPE), over a K/V cache.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "models/blocks/attention.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class GqaAttention final : public AttentionBlock {
 public:
  static Expected<std::unique_ptr<AttentionBlock>> Bind(WeightBinder& w, const ModelConfig& c,
                                                        int64_t layer, const RopeTable& rope);
  // Norm and q/k/v in one FusedMatmul, RoPE, cache writes and attention of
  // every sequence in one StepAttention, o and the residual add in one FusedMatmul.
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override {
    Run(ctx, x, &norm, y, &x);
  }
  void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) override {
    Run(ctx, xn, nullptr, out, nullptr);
  }
  LayerCacheSpec cache_spec() const override;
  uint64_t workspace_floats(int64_t t) const override;
  AttentionShape attention_shape() const override {
    return {c_.num_heads, c_.num_kv_heads, c_.head_dim, c_.head_dim};
  }

 private:
  GqaAttention(const ModelConfig& c, const RopeTable& rope) : c_(c), rope_(rope) {}
  // Attention of x (normed first when `norm`) into y, added to *residual when given.
  void Run(StepContext& ctx, const Tensor& x, const RowNorm* norm, const Tensor& y,
           const Tensor* residual);
  const ModelConfig& c_;
  const RopeTable& rope_;
  Tensor wq_, wk_, wv_, wo_;
  std::optional<Tensor> bq_, bk_, bv_, q_norm_, k_norm_;
  std::vector<AttentionSegment> segments_;  // this step's, grown to the most sequences seen
};

}  // namespace anymoe
