#include "models/blocks/gqa_attention.h"

namespace anymoe {

Expected<std::unique_ptr<AttentionBlock>> GqaAttention::Bind(WeightBinder& w,
                                                             const ModelConfig& c, int64_t i,
                                                             const RopeTable& rope) {
  std::unique_ptr<GqaAttention> a(new GqaAttention(c, rope));
  const int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                kv_dim = c.num_kv_heads * c.head_dim;
  ASSIGN_OR_RETURN(a->wq_, w.Layer(i, "self_attn.q_proj.weight", {q_dim, h}));
  ASSIGN_OR_RETURN(a->wk_, w.Layer(i, "self_attn.k_proj.weight", {kv_dim, h}));
  ASSIGN_OR_RETURN(a->wv_, w.Layer(i, "self_attn.v_proj.weight", {kv_dim, h}));
  ASSIGN_OR_RETURN(a->wo_, w.Layer(i, "self_attn.o_proj.weight", {h, q_dim}));
  ASSIGN_OR_RETURN(a->bq_, w.OptionalLayer(i, "self_attn.q_proj.bias", {q_dim}));
  ASSIGN_OR_RETURN(a->bk_, w.OptionalLayer(i, "self_attn.k_proj.bias", {kv_dim}));
  ASSIGN_OR_RETURN(a->bv_, w.OptionalLayer(i, "self_attn.v_proj.bias", {kv_dim}));
  if (c.qk_norm) {
    ASSIGN_OR_RETURN(a->q_norm_, w.Layer(i, "self_attn.q_norm.weight", {c.head_dim}));
    ASSIGN_OR_RETURN(a->k_norm_, w.Layer(i, "self_attn.k_norm.weight", {c.head_dim}));
  }
  return std::unique_ptr<AttentionBlock>(std::move(a));
}

LayerCacheSpec GqaAttention::cache_spec() const {
  return LayerCacheSpec{.kv_heads = c_.num_kv_heads, .k_dim = c_.head_dim, .v_dim = c_.head_dim};
}

uint64_t GqaAttention::workspace_floats(int64_t t) const {
  const int64_t q_dim = c_.num_heads * c_.head_dim, kv_dim = c_.num_kv_heads * c_.head_dim;
  return 2 * Workspace::Footprint(t, q_dim) + 2 * Workspace::Footprint(t, kv_dim);
}

void GqaAttention::Run(StepContext& ctx, const Tensor& x, const RowNorm* norm, const Tensor& y,
                       const Tensor* residual) {
  Backend& be = ctx.backend;
  const int64_t t = ctx.t, n_h = c_.num_heads, n_kv = c_.num_kv_heads, hd = c_.head_dim;
  Tensor q = ctx.ws.Take(t, n_h * hd), k = ctx.ws.Take(t, n_kv * hd),
         v = ctx.ws.Take(t, n_kv * hd), attn = ctx.ws.Take(t, n_h * hd);
  const Projection qkv[] = {{&wq_, bq_ ? &*bq_ : nullptr, q},   // [T, n_h * hd]
                           {&wk_, bk_ ? &*bk_ : nullptr, k},   // [T, n_kv * hd]
                           {&wv_, bv_ ? &*bv_ : nullptr, v}};
  be.FusedMatmul(x, qkv, {.norm = norm});
  if (q_norm_) {
    be.RmsNorm(q.Reshaped({t * n_h, hd}), *q_norm_, c_.rms_norm_eps, q.Reshaped({t * n_h, hd}));
    be.RmsNorm(k.Reshaped({t * n_kv, hd}), *k_norm_, c_.rms_norm_eps, k.Reshaped({t * n_kv, hd}));
  }
  // Each sequence against its own cache, all sequences in one call.
  segments_.clear();
  for (const Segment& s : ctx.segments) {
    const KvPool::Layer& pool = s.cache->layer(ctx.layer);
    segments_.push_back({s.row0, s.rows, &pool.k, &pool.v, s.cache->rows(), s.n_past});
  }
  be.StepAttention({.q = q.Reshaped({t, n_h, hd}),
                    .k = k.Reshaped({t, n_kv, hd}),
                    .v = v.Reshaped({t, n_kv, hd}),
                    .positions = ctx.positions,
                    .rope = &rope_,
                    .segments = segments_,
                    .scale = c_.AttentionScale(),
                    .out = attn.Reshaped({t, n_h, hd})});
  const Projection o[] = {{&wo_, nullptr, y}};
  be.FusedMatmul(attn, o, {.residual = residual});  // x += o(attn), or y = o(attn)
}

}  // namespace anymoe
