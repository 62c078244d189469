// GLM-5.3-Flash's linear-attention layers: Kimi delta attention (KDA,
// shared/new-archs.md §1.5). q/k/v projections, the low-rank forget-gate and
// output-gate projections and beta run as matmuls over the step's rows; the
// conv, gate, delta rule and gated norm run per sequence in
// Backend::KimiDeltaAttention over the sequence's fixed recurrent state
// (KvCache::state): the recurrent form for a one-token continuation, the
// chunked form otherwise, as transformers chooses.
#pragma once

#include <memory>

#include "models/blocks/attention.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class KdaAttention final : public AttentionBlock {
 public:
  static Expected<std::unique_ptr<AttentionBlock>> Bind(WeightBinder& w, Backend& backend,
                                                        const ModelConfig& c, int64_t layer);
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override {
    AddNormed(ctx.backend, x, norm, y,
              [&](const Tensor& xn, const Tensor& out) { Compute(ctx, xn, out); });
  }
  void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) override;
  LayerCacheSpec cache_spec() const override { return {.state_floats = c_.kda.state_floats()}; }
  uint64_t workspace_floats(int64_t t) const override;

 private:
  explicit KdaAttention(const ModelConfig& c) : c_(c) {}
  const ModelConfig& c_;
  Tensor wq_, wk_, wv_, f_a_, f_b_, dt_bias_, a_log_, b_proj_, g_a_, g_b_, o_norm_, wo_;
  std::unique_ptr<Buffer> conv_buffer_;
  Tensor conv_;  // [3D, conv_kernel] f32: the q, k and v convs stacked
  KdaSpec spec_;
};

}  // namespace anymoe
