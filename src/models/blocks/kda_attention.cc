#include "models/blocks/kda_attention.h"

#include <vector>

namespace anymoe {

Expected<std::unique_ptr<AttentionBlock>> KdaAttention::Bind(WeightBinder& w, Backend& backend,
                                                             const ModelConfig& c, int64_t i) {
  std::unique_ptr<KdaAttention> a(new KdaAttention(c));
  const KdaConfig& k = c.kda;
  const int64_t h = c.hidden_size, d = k.head_dim, D = k.num_heads * d, kc = k.conv_kernel;
  ASSIGN_OR_RETURN(a->wq_, w.Layer(i, "self_attn.q_proj.weight", {D, h}));
  ASSIGN_OR_RETURN(a->wk_, w.Layer(i, "self_attn.k_proj.weight", {D, h}));
  ASSIGN_OR_RETURN(a->wv_, w.Layer(i, "self_attn.v_proj.weight", {D, h}));
  // Released checkpoints keep the forget gate's tensors on self_attn and one
  // conv per q/k/v; transformers' module paths nest and stack them.
  auto either = [&](const std::string& hf, const std::string& raw,
                    std::initializer_list<int64_t> shape) -> Expected<Tensor> {
    ASSIGN_OR_RETURN(auto t, w.OptionalLayer(i, hf, shape));
    if (t) return *t;
    return w.Layer(i, raw, shape);
  };
  ASSIGN_OR_RETURN(a->f_a_, either("self_attn.forget_gate.f_a_proj.weight",
                                   "self_attn.f_a_proj.weight", {d, h}));
  ASSIGN_OR_RETURN(a->f_b_, either("self_attn.forget_gate.f_b_proj.weight",
                                   "self_attn.f_b_proj.weight", {D, d}));
  ASSIGN_OR_RETURN(a->dt_bias_, either("self_attn.forget_gate.dt_bias", "self_attn.dt_bias", {D}));
  ASSIGN_OR_RETURN(a->a_log_, either("self_attn.forget_gate.A_log", "self_attn.A_log",
                                     {k.num_heads}));
  ASSIGN_OR_RETURN(a->b_proj_, w.Layer(i, "self_attn.b_proj.weight", {k.num_heads, h}));
  ASSIGN_OR_RETURN(a->g_a_, w.Layer(i, "self_attn.g_a_proj.weight", {d, h}));
  ASSIGN_OR_RETURN(a->g_b_, w.Layer(i, "self_attn.g_b_proj.weight", {D, d}));
  ASSIGN_OR_RETURN(a->o_norm_, w.Layer(i, "self_attn.o_norm.weight", {d}));
  ASSIGN_OR_RETURN(a->wo_, w.Layer(i, "self_attn.o_proj.weight", {h, D}));
  std::vector<float> conv(size_t(3 * D * kc));
  ASSIGN_OR_RETURN(auto stacked, w.OptionalLayer(i, "self_attn.conv1d.weight", {3 * D, 1, kc}));
  if (stacked) {
    backend.ReadF32(*stacked, conv);
  } else {
    const char* parts[] = {"self_attn.q_conv1d.weight", "self_attn.k_conv1d.weight",
                           "self_attn.v_conv1d.weight"};
    for (int p = 0; p < 3; ++p) {
      ASSIGN_OR_RETURN(Tensor t, w.Layer(i, parts[p], {D, 1, kc}));
      backend.ReadF32(t, std::span(conv).subspan(size_t(p * D * kc), size_t(D * kc)));
    }
  }
  ASSIGN_OR_RETURN(a->conv_buffer_, backend.Allocate(conv.size() * sizeof(float), "KDA conv"));
  a->conv_ = Tensor::Of(a->conv_buffer_->base(), DType::kF32, {3 * D, kc});
  backend.WriteF32(conv, a->conv_);
  a->spec_ = KdaSpec{k.num_heads, d,           kc,         k.bounded_gate, k.lower_bound,
                     c.rms_norm_eps, &a->conv_, &a->dt_bias_, &a->a_log_,  &a->o_norm_};
  return std::unique_ptr<AttentionBlock>(std::move(a));
}

uint64_t KdaAttention::workspace_floats(int64_t t) const {
  const KdaConfig& k = c_.kda;
  const int64_t d = k.head_dim, D = k.num_heads * d;
  return 3 * Workspace::Footprint(t, D) + Workspace::Footprint(t, 3 * D) +
         2 * Workspace::Footprint(t, d) + 2 * Workspace::Footprint(t, D) +
         Workspace::Footprint(t, k.num_heads) + Workspace::Footprint(t, D);
}

void KdaAttention::Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) {
  Backend& be = ctx.backend;
  const KdaConfig& k = c_.kda;
  const int64_t t = ctx.t, d = k.head_dim, D = k.num_heads * d;
  const Tensor q = ctx.ws.Take(t, D), kk = ctx.ws.Take(t, D), v = ctx.ws.Take(t, D),
               u = ctx.ws.Take(t, 3 * D), fa = ctx.ws.Take(t, d), ga = ctx.ws.Take(t, d),
               f = ctx.ws.Take(t, D), g = ctx.ws.Take(t, D), beta = ctx.ws.Take(t, k.num_heads),
               o = ctx.ws.Take(t, D);
  const Projection in[] = {{&wq_, nullptr, q},     {&wk_, nullptr, kk},   {&wv_, nullptr, v},
                           {&f_a_, nullptr, fa},   {&g_a_, nullptr, ga},  {&b_proj_, nullptr, beta}};
  be.MultiMatmul(xn, in);
  be.Matmul(fa, f_b_, nullptr, f);
  be.Matmul(ga, g_b_, nullptr, g);
  be.CopyColumns(q, 0, u, 0, D);
  be.CopyColumns(kk, 0, u, D, D);
  be.CopyColumns(v, 0, u, 2 * D, D);
  for (const Segment& s : ctx.segments) {
    // transformers: the recurrent form for a one-token step over a cached
    // state, the chunked form for prefill and chunks. Decode steps of several
    // rows (speculative verify, replay) take the recurrent form too: bitwise
    // plain greedy decoding's numbers.
    const bool chunked = !(s.token_by_token || (s.rows == 1 && s.n_past > 0));
    be.KimiDeltaAttention(spec_, chunked, u.RowSlice(s.row0, s.rows), f.RowSlice(s.row0, s.rows),
                          beta.RowSlice(s.row0, s.rows), g.RowSlice(s.row0, s.rows),
                          s.cache->state(ctx.layer), o.RowSlice(s.row0, s.rows));
  }
  be.Matmul(o, wo_, nullptr, out);
}

}  // namespace anymoe
