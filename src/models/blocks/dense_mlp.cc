#include "models/blocks/dense_mlp.h"

namespace anymoe {

Expected<std::unique_ptr<DenseMlp>> DenseMlp::Bind(WeightBinder& w, int64_t i,
                                                  const std::string& prefix, int64_t hidden,
                                                  int64_t ffn, float swiglu_limit) {
  ASSIGN_OR_RETURN(Tensor gate, w.Layer(i, prefix + ".gate_proj.weight", {ffn, hidden}));
  ASSIGN_OR_RETURN(Tensor up, w.Layer(i, prefix + ".up_proj.weight", {ffn, hidden}));
  ASSIGN_OR_RETURN(Tensor down, w.Layer(i, prefix + ".down_proj.weight", {hidden, ffn}));
  return std::make_unique<DenseMlp>(gate, up, down, swiglu_limit);
}

uint64_t DenseMlp::workspace_floats(int64_t t) const {
  return 2 * Workspace::Footprint(t, gate_.rows());
}

void DenseMlp::Run(Backend& be, const Tensor& x, const Tensor& g_scratch, const Tensor& u_scratch,
                   const Tensor& out) const {
  const int64_t t = x.rows(), ffn = gate_.rows();
  const Tensor g = g_scratch.Prefix(t, ffn), u = u_scratch.Prefix(t, ffn);
  const Projection gate_up[] = {{&gate_, nullptr, g}, {&up_, nullptr, u}};  // [T, I] each
  if (limit_ > 0) {
    be.MultiMatmul(x, gate_up);
    be.ClampedSwiGlu(g, u, limit_, g);
  } else {
    be.FusedMatmul(x, gate_up, {.swiglu = true});  // g = silu(gate(x)) * up(x)
  }
  be.Matmul(g, down_, nullptr, out);  // [T, H]
}

void DenseMlp::Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) {
  const int64_t t = ctx.t, ffn = gate_.rows();
  Run(ctx.backend, xn, ctx.ws.Take(t, ffn), ctx.ws.Take(t, ffn), out);
}

void DenseMlp::AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) {
  Backend& be = ctx.backend;
  const int64_t t = ctx.t, ffn = gate_.rows();
  const Tensor g = ctx.ws.Take(t, ffn), u = ctx.ws.Take(t, ffn);
  const Projection gate_up[] = {{&gate_, nullptr, g}, {&up_, nullptr, u}};  // [T, I] each
  if (limit_ > 0) {
    be.FusedMatmul(x, gate_up, {.norm = &norm});
    be.ClampedSwiGlu(g, u, limit_, g);
  } else {
    be.FusedMatmul(x, gate_up, {.norm = &norm, .swiglu = true});  // g = silu(gate(xn)) * up(xn)
  }
  const Projection down[] = {{&down_, nullptr, y}};
  be.FusedMatmul(g, down, {.residual = &x});  // x += down(g)
}

}  // namespace anymoe
