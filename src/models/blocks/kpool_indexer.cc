#include "models/blocks/kpool_indexer.h"

#include <cmath>

namespace anymoe {

Expected<std::unique_ptr<KPoolIndexer>> KPoolIndexer::Bind(WeightBinder& w, const ModelConfig& c,
                                                          int64_t i) {
  std::unique_ptr<KPoolIndexer> d(new KPoolIndexer(c));
  const DsaConfig& s = c.dsa;
  ASSIGN_OR_RETURN(d->wq_b_, w.Layer(i, "self_attn.indexer.wq_b.weight",
                                     {s.n_heads * s.head_dim, c.mla.q_lora_rank}));
  ASSIGN_OR_RETURN(d->wk_, w.Layer(i, "self_attn.indexer.wk.weight", {s.head_dim, c.hidden_size}));
  ASSIGN_OR_RETURN(d->k_norm_w_, w.Layer(i, "self_attn.indexer.k_norm.weight", {s.head_dim}));
  ASSIGN_OR_RETURN(d->k_norm_b_, w.Layer(i, "self_attn.indexer.k_norm.bias", {s.head_dim}));
  ASSIGN_OR_RETURN(d->weights_proj_,
                   w.Layer(i, "self_attn.indexer.weights_proj.weight", {s.n_heads, c.hidden_size}));
  ASSIGN_OR_RETURN(d->ape_, w.Layer(i, "self_attn.indexer.index_kpool_compress_ape",
                                    {c.kpool.pool, s.head_dim}));
  ASSIGN_OR_RETURN(d->gate_, w.Layer(i, "self_attn.indexer.index_kpool_compress_gate",
                                     {s.head_dim, c.hidden_size}));
  return d;
}

int64_t KPoolIndexer::stride() const {
  return c_.dsa.topk + (c_.kpool.select_tail ? c_.kpool.pool - 1 : 0);
}

uint64_t KPoolIndexer::workspace_floats(int64_t t) const {
  const DsaConfig& s = c_.dsa;
  return Workspace::Footprint(t, s.n_heads * s.head_dim) + 2 * Workspace::Footprint(t, s.head_dim) +
         Workspace::Footprint(t, 2 * s.head_dim) + Workspace::Footprint(t, s.n_heads);
}

void KPoolIndexer::Select(StepContext& ctx, const Tensor& x, const Tensor& q_latent) {
  Backend& be = ctx.backend;
  const DsaConfig& s = c_.dsa;
  const int64_t t = ctx.t, d = s.head_dim;
  Tensor q = ctx.ws.Take(t, s.n_heads * d), k = ctx.ws.Take(t, d), z = ctx.ws.Take(t, d),
         rows = ctx.ws.Take(t, 2 * d), head_w = ctx.ws.Take(t, s.n_heads);
  be.Matmul(q_latent, wq_b_, nullptr, q);  // [T, n_I * d_I], no RoPE
  be.Matmul(x, wk_, nullptr, k);
  be.LayerNorm(k, k_norm_w_, k_norm_b_, s.norm_eps, k);
  be.Matmul(x, gate_, nullptr, z);  // the pooling's gate scores
  be.CopyColumns(k, 0, rows, 0, d);
  be.CopyColumns(z, 0, rows, d, d);
  // The reference scales the head weights by n_I^-1/2; a positive factor on
  // every score cannot change the top-k, so it is left out (as DsaIndexer does).
  be.Matmul(x, weights_proj_, nullptr, head_w);
  const KPoolSpec spec{s.n_heads, d, c_.kpool.pool, s.topk, c_.kpool.select_tail,
                       1.0f / std::sqrt(float(d)), &ape_};
  DsaSelection& sel = *ctx.dsa;
  sel.stride = stride();
  for (const Segment& seg : ctx.segments) {
    const Tensor& cached = seg.cache->layer(ctx.layer).index_keys;
    be.ScatterRows(rows.RowSlice(seg.row0, seg.rows), seg.new_rows(), cached);
    be.KPoolTopK(spec, q.RowSlice(seg.row0, seg.rows).Reshaped({seg.rows, s.n_heads, d}),
                 head_w.RowSlice(seg.row0, seg.rows), cached, seg.cache->rows(), seg.n_past,
                 std::span(sel.keys).subspan(size_t(seg.row0 * sel.stride), size_t(seg.rows * sel.stride)),
                 std::span(sel.counts).subspan(size_t(seg.row0), size_t(seg.rows)));
  }
  sel.valid = true;
}

}  // namespace anymoe
