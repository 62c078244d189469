// The SwiGLU MLP: down(silu(gate(x)) * up(x)), no biases, with GLM-5.3's clamp
// of gate and up when a limit is given. Used for dense layers, shared experts,
// and (with per-expert weights) each routed expert.
#pragma once

#include <memory>
#include <string>

#include "models/blocks/attention.h"
#include "models/weight_binder.h"

namespace anymoe {

class DenseMlp final : public FeedForwardBlock {
 public:
  // Binds `<prefix>.{gate,up,down}_proj.weight` of layer `layer`, width `ffn`.
  // `swiglu_limit` > 0: silu(min(gate, limit)) * clamp(up, -limit, limit).
  static Expected<std::unique_ptr<DenseMlp>> Bind(WeightBinder& w, int64_t layer,
                                                  const std::string& prefix, int64_t hidden,
                                                  int64_t ffn, float swiglu_limit = 0);
  DenseMlp(Tensor gate, Tensor up, Tensor down, float swiglu_limit = 0)
      : gate_(gate), up_(up), down_(down), limit_(swiglu_limit) {}

  // Norm, gate/up and SwiGLU in one FusedMatmul; down and the residual add in another.
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override;
  void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) override;
  uint64_t workspace_floats(int64_t t) const override;
  const Tensor& gate() const { return gate_; }
  const Tensor& up() const { return up_; }
  const Tensor& down() const { return down_; }
  // out = down(silu(gate(x)) * up(x)) (the shared expert of a MoE block); g
  // and u are scratch of at least [T, ffn] floats each.
  void Run(Backend& be, const Tensor& x, const Tensor& g, const Tensor& u, const Tensor& out) const;

 private:
  Tensor gate_, up_, down_;
  float limit_ = 0;
};

}  // namespace anymoe
