#include "models/blocks/dsa_indexer.h"

#include <cmath>

namespace anymoe {

Expected<std::unique_ptr<DsaIndexer>> DsaIndexer::Bind(WeightBinder& w, const ModelConfig& c,
                                                      int64_t i, const RopeTable& rope) {
  std::unique_ptr<DsaIndexer> d(new DsaIndexer(c, rope));
  const DsaConfig& s = c.dsa;
  d->rope_.rotary_offset = 0;
  d->rope_.pairing = s.pairing;
  ASSIGN_OR_RETURN(d->wq_b_, w.Layer(i, "self_attn.indexer.wq_b.weight",
                                     {s.n_heads * s.head_dim, c.mla.q_lora_rank}));
  ASSIGN_OR_RETURN(d->wk_, w.Layer(i, "self_attn.indexer.wk.weight", {s.head_dim, c.hidden_size}));
  ASSIGN_OR_RETURN(d->k_norm_w_, w.Layer(i, "self_attn.indexer.k_norm.weight", {s.head_dim}));
  ASSIGN_OR_RETURN(d->k_norm_b_, w.Layer(i, "self_attn.indexer.k_norm.bias", {s.head_dim}));
  ASSIGN_OR_RETURN(d->weights_proj_,
                   w.Layer(i, "self_attn.indexer.weights_proj.weight", {s.n_heads, c.hidden_size}));
  return d;
}

uint64_t DsaIndexer::workspace_floats(int64_t t) const {
  const DsaConfig& s = c_.dsa;
  return Workspace::Footprint(t, s.n_heads * s.head_dim) + Workspace::Footprint(t, s.head_dim) +
         Workspace::Footprint(t, s.n_heads);
}

void DsaIndexer::Select(StepContext& ctx, const Tensor& x, const Tensor& q_latent) {
  Backend& be = ctx.backend;
  const DsaConfig& s = c_.dsa;
  const int64_t t = ctx.t;
  Tensor q = ctx.ws.Take(t, s.n_heads * s.head_dim), k = ctx.ws.Take(t, s.head_dim),
         head_w = ctx.ws.Take(t, s.n_heads);
  be.Matmul(q_latent, wq_b_, nullptr, q);  // [T, n_I * d_I], each head [rope | pass]
  be.Rope(q.Reshaped({t, s.n_heads, s.head_dim}), ctx.positions, rope_);
  be.Matmul(x, wk_, nullptr, k);  // [T, d_I]: one key per token, shared by all heads
  be.LayerNorm(k, k_norm_w_, k_norm_b_, s.norm_eps, k);
  be.Rope(k.Reshaped({t, 1, s.head_dim}), ctx.positions, rope_);
  // The reference also scales the head weights by n_I^-1/2; a positive factor on
  // every score cannot change the top-k, so it is left out.
  be.Matmul(x, weights_proj_, nullptr, head_w);  // [T, n_I]
  DsaSelection& sel = *ctx.dsa;
  sel.stride = s.topk;
  for (const Segment& seg : ctx.segments) {
    const Tensor& keys = seg.cache->layer(ctx.layer).index_keys;
    be.ScatterRows(k.RowSlice(seg.row0, seg.rows), seg.new_rows(), keys);
    be.IndexerTopK(q.RowSlice(seg.row0, seg.rows).Reshaped({seg.rows, s.n_heads, s.head_dim}),
                   keys, head_w.RowSlice(seg.row0, seg.rows), seg.cache->rows(), seg.n_past,
                   1.0f / std::sqrt(float(s.head_dim)), s.topk,
                   std::span(sel.keys).subspan(size_t(seg.row0 * s.topk), size_t(seg.rows * s.topk)),
                   std::span(sel.counts).subspan(size_t(seg.row0), size_t(seg.rows)));
  }
  sel.valid = true;
}

}  // namespace anymoe
