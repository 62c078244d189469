#include "models/blocks/dense_mlp.h"

namespace anymoe {

Expected<std::unique_ptr<DenseMlp>> DenseMlp::Bind(WeightBinder& w, int64_t i,
                                                  const std::string& prefix, int64_t hidden,
                                                  int64_t ffn) {
  ASSIGN_OR_RETURN(Tensor gate, w.Layer(i, prefix + ".gate_proj.weight", {ffn, hidden}));
  ASSIGN_OR_RETURN(Tensor up, w.Layer(i, prefix + ".up_proj.weight", {ffn, hidden}));
  ASSIGN_OR_RETURN(Tensor down, w.Layer(i, prefix + ".down_proj.weight", {hidden, ffn}));
  return std::make_unique<DenseMlp>(gate, up, down);
}

uint64_t DenseMlp::workspace_floats(int64_t t) const {
  return 2 * Workspace::Footprint(t, gate_.rows());
}

void DenseMlp::Run(Backend& be, const Tensor& x, const Tensor& gate, const Tensor& up,
                   const Tensor& down, const Tensor& g_scratch, const Tensor& u_scratch,
                   const Tensor& out) {
  const int64_t t = x.rows(), ffn = gate.rows();
  const Tensor g = g_scratch.Prefix(t, ffn), u = u_scratch.Prefix(t, ffn);
  const Projection gate_up[] = {{&gate, nullptr, g}, {&up, nullptr, u}};  // [T, I] each
  be.MultiMatmul(x, gate_up);
  be.SwiGlu(g, u, g);
  be.Matmul(g, down, nullptr, out);  // [T, H]
}

void DenseMlp::Forward(StepContext& ctx, const Tensor& x, const Tensor& out) {
  const int64_t ffn = gate_.rows();
  Run(ctx.backend, x, gate_, up_, down_, ctx.ws.Take(ctx.t, ffn), ctx.ws.Take(ctx.t, ffn), out);
}

}  // namespace anymoe
