// One mHC hyper-connection (GLM-5.3-Flash: `attn_hc` and `ffn_hc` of every
// layer): from the residual streams x [T, N H] it computes, per token, the
// weights that collapse the streams into the sublayer's input and, after the
// sublayer, expand its output back and mix the old streams in
// (shared/new-archs.md §1.3-1.4). The projection of the unweighted-RMS-normed
// streams is a plain matmul; the rest is Backend::HyperConnection*.
#pragma once

#include "models/blocks/step_context.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class HyperConnection {
 public:
  // `which`: "attn" or "ffn". `ones` [N H] (all 1: the norm has no weight).
  static Expected<HyperConnection> Bind(WeightBinder& w, const ModelConfig& c, int64_t layer,
                                        const std::string& which, const Tensor& ones);
  // collapsed [T, H] = sum_n pre[n] x[n], and post [T, N], comb [T, N N] for
  // Expand (buffers that outlive the sublayer's workspace).
  void Collapse(StepContext& ctx, const Tensor& x, const Tensor& collapsed, const Tensor& post,
                const Tensor& comb) const;
  // x[n] <- post[n] * y + sum_m comb[m, n] x[m].
  void Expand(StepContext& ctx, const Tensor& post, const Tensor& comb, const Tensor& y,
              const Tensor& x) const;
  uint64_t workspace_floats(int64_t t) const;

 private:
  const ModelConfig* c_ = nullptr;
  Tensor fn_, base_, scale_;
  const Tensor* ones_ = nullptr;
  // The op's spec, pointing at this object's base_ and scale_ (built per call:
  // a HyperConnection is moved into its layer after Bind).
  HyperConnectionSpec Spec() const {
    return HyperConnectionSpec{c_->hc.mult, c_->hc.sinkhorn_iters, c_->hc.eps, &base_, &scale_};
  }
};

}  // namespace anymoe
