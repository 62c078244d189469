#include "models/blocks/hyper_connection.h"

namespace anymoe {

Expected<HyperConnection> HyperConnection::Bind(WeightBinder& w, const ModelConfig& c,
                                                int64_t i, const std::string& which,
                                                const Tensor& ones) {
  HyperConnection hc;
  hc.c_ = &c;
  const int64_t n = c.hc.mult, m = (2 + n) * n;
  // Released checkpoints name them hc_attn_fn ...; transformers' module path is attn_hc.fn.
  auto bind = [&](const std::string& part, std::initializer_list<int64_t> shape) -> Expected<Tensor> {
    ASSIGN_OR_RETURN(auto t, w.OptionalLayer(i, which + "_hc." + part, shape));
    if (t) return *t;
    return w.Layer(i, "hc_" + which + "_" + part, shape);
  };
  ASSIGN_OR_RETURN(hc.fn_, bind("fn", {m, n * c.hidden_size}));
  ASSIGN_OR_RETURN(hc.base_, bind("base", {m}));
  ASSIGN_OR_RETURN(hc.scale_, bind("scale", {3}));
  hc.ones_ = &ones;
  return hc;
}

uint64_t HyperConnection::workspace_floats(int64_t t) const {
  const int64_t n = c_->hc.mult;
  return Workspace::Footprint(t, n * c_->hidden_size) + Workspace::Footprint(t, (2 + n) * n);
}

void HyperConnection::Collapse(StepContext& ctx, const Tensor& x, const Tensor& collapsed,
                               const Tensor& post, const Tensor& comb) const {
  Backend& be = ctx.backend;
  const int64_t t = x.rows(), n = c_->hc.mult;
  const Tensor normed = ctx.ws.Take(t, n * c_->hidden_size), mix = ctx.ws.Take(t, (2 + n) * n);
  be.RmsNorm(x, *ones_, c_->rms_norm_eps, normed);  // the unweighted input norm, f32
  be.Matmul(normed, fn_, nullptr, mix);
  be.HyperConnectionWeights(Spec(), mix, x, collapsed, post, comb);
}

void HyperConnection::Expand(StepContext& ctx, const Tensor& post, const Tensor& comb,
                             const Tensor& y, const Tensor& x) const {
  ctx.backend.HyperConnectionExpand(Spec(), y, post, comb, x);
}

}  // namespace anymoe
