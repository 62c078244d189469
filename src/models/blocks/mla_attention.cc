#include "models/blocks/mla_attention.h"

#include <vector>

namespace anymoe {

Expected<std::unique_ptr<AttentionBlock>> MlaAttention::Bind(WeightBinder& w, Backend& backend,
                                                             const ModelConfig& c, int64_t i,
                                                             const RopeTable& rope) {
  std::unique_ptr<MlaAttention> a(new MlaAttention(c, rope));
  const MlaConfig& m = c.mla;
  const int64_t h = c.hidden_size, n_h = c.num_heads, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  a->rope_.rotary_offset = int(m.qk_nope_head_dim);
  if (m.q_lora_rank > 0) {
    ASSIGN_OR_RETURN(a->wq_a_, w.Layer(i, "self_attn.q_a_proj.weight", {m.q_lora_rank, h}));
    ASSIGN_OR_RETURN(a->q_a_norm_, w.Layer(i, "self_attn.q_a_layernorm.weight", {m.q_lora_rank}));
    ASSIGN_OR_RETURN(a->wq_b_, w.Layer(i, "self_attn.q_b_proj.weight", {n_h * qk, m.q_lora_rank}));
  } else {
    ASSIGN_OR_RETURN(a->wq_, w.Layer(i, "self_attn.q_proj.weight", {n_h * qk, h}));
  }
  ASSIGN_OR_RETURN(a->wkv_a_, w.Layer(i, "self_attn.kv_a_proj_with_mqa.weight",
                                      {m.kv_lora_rank + m.qk_rope_head_dim, h}));
  ASSIGN_OR_RETURN(a->kv_a_norm_, w.Layer(i, "self_attn.kv_a_layernorm.weight", {m.kv_lora_rank}));
  ASSIGN_OR_RETURN(a->wo_, w.Layer(i, "self_attn.o_proj.weight", {h, n_h * m.v_head_dim}));
  ASSIGN_OR_RETURN(auto kv_b, w.OptionalLayer(i, "self_attn.kv_b_proj.weight",
                                              {n_h * (m.qk_nope_head_dim + m.v_head_dim),
                                               m.kv_lora_rank}));
  if (kv_b) {
    RETURN_IF_ERROR(a->AbsorbKvB(backend, *kv_b));
  } else {
    // llama.cpp's converter already splits kv_b_proj into the absorbed pair:
    // attn_k_b [n_h, kv_lora, d_nope] (transposed) and attn_v_b [n_h, d_v, kv_lora].
    const std::string blk = "blk." + std::to_string(i) + ".";
    ASSIGN_OR_RETURN(Tensor k_b, w.Require(blk + "attn_k_b.weight",
                                           {n_h, m.kv_lora_rank, m.qk_nope_head_dim}));
    ASSIGN_OR_RETURN(Tensor v_b, w.Require(blk + "attn_v_b.weight",
                                           {n_h, m.v_head_dim, m.kv_lora_rank}));
    RETURN_IF_ERROR(a->StoreAbsorbed(backend, k_b, v_b));
  }
  if (c.dsa.topk > 0) {
    a->uses_dsa_ = true;
    if (c.indexer_kinds[size_t(i)] == IndexerKind::kFull) {
      ASSIGN_OR_RETURN(a->indexer_, DsaIndexer::Bind(w, c, i, rope));
    }
  }
  return std::unique_ptr<AttentionBlock>(std::move(a));
}

// Splits kv_b_proj ([n_h * (d_nope + d_v), kv_lora], per head k_nope rows then v
// rows) into the two per-head matrices of the absorbed form, in f32.
Status MlaAttention::AbsorbKvB(Backend& backend, const Tensor& kv_b) {
  const MlaConfig& m = c_.mla;
  const int64_t n_h = c_.num_heads, dn = m.qk_nope_head_dim, dv = m.v_head_dim,
                r = m.kv_lora_rank;
  std::vector<float> w(size_t(kv_b.elements()));
  backend.ReadF32(kv_b, w);
  std::vector<float> wk(size_t(n_h * r * dn)), wv(size_t(n_h * dv * r));
  for (int64_t h = 0; h < n_h; ++h) {
    const float* rows = w.data() + h * (dn + dv) * r;
    for (int64_t i = 0; i < dn; ++i) {
      for (int64_t j = 0; j < r; ++j) wk[size_t((h * r + j) * dn + i)] = rows[i * r + j];
    }
    std::copy(rows + dn * r, rows + (dn + dv) * r, wv.begin() + h * dv * r);
  }
  return WriteAbsorbed(backend, wk, wv);
}

Status MlaAttention::StoreAbsorbed(Backend& backend, const Tensor& k_b, const Tensor& v_b) {
  std::vector<float> wk(size_t(k_b.elements())), wv(size_t(v_b.elements()));
  backend.ReadF32(k_b, wk);
  backend.ReadF32(v_b, wv);
  return WriteAbsorbed(backend, wk, wv);
}

// Keeps the two per-head matrices in f32 device memory: [n_h, kv_lora, d_nope]
// then [n_h, d_v, kv_lora].
Status MlaAttention::WriteAbsorbed(Backend& backend, std::span<const float> wk,
                                   std::span<const float> wv) {
  const MlaConfig& m = c_.mla;
  const int64_t n_h = c_.num_heads, r = m.kv_lora_rank;
  ASSIGN_OR_RETURN(absorbed_, backend.Allocate((wk.size() + wv.size()) * sizeof(float),
                                               "absorbed MLA weights"));
  w_k_absorb_ = Tensor::Of(absorbed_->base(), DType::kF32, {n_h, r, m.qk_nope_head_dim});
  w_v_absorb_ = Tensor::Of(absorbed_->base(), DType::kF32, {n_h, m.v_head_dim, r});
  w_v_absorb_.offset = wk.size() * sizeof(float);
  backend.WriteF32(wk, w_k_absorb_);
  backend.WriteF32(wv, w_v_absorb_);
  return Status::Ok();
}

LayerCacheSpec MlaAttention::cache_spec() const {
  LayerCacheSpec s;
  s.latent_dim = c_.mla.kv_lora_rank + c_.mla.qk_rope_head_dim;
  if (indexer_) s.index_dim = c_.dsa.head_dim;
  return s;
}

uint64_t MlaAttention::workspace_floats(int64_t t) const {
  const MlaConfig& m = c_.mla;
  const int64_t n_h = c_.num_heads, r = m.kv_lora_rank, dr = m.qk_rope_head_dim;
  uint64_t f = Workspace::Footprint(t, m.q_lora_rank) +
               Workspace::Footprint(t, n_h * (m.qk_nope_head_dim + dr)) +
               Workspace::Footprint(t, r + dr) + Workspace::Footprint(t, r) +
               Workspace::Footprint(t, n_h * (r + dr)) + Workspace::Footprint(t, n_h * r) +
               Workspace::Footprint(t, n_h * m.v_head_dim);
  if (indexer_) f += indexer_->workspace_floats(t);
  return f;
}

Tensor MlaAttention::Query(StepContext& ctx, const Tensor& x, Tensor* q_latent) {
  Backend& be = ctx.backend;
  const MlaConfig& m = c_.mla;
  const int64_t t = ctx.t, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  Tensor q = ctx.ws.Take(t, c_.num_heads * qk);
  if (wq_a_) {
    *q_latent = ctx.ws.Take(t, m.q_lora_rank);
    be.Matmul(x, *wq_a_, nullptr, *q_latent);
    be.RmsNorm(*q_latent, *q_a_norm_, m.latent_norm_eps, *q_latent);
    be.Matmul(*q_latent, *wq_b_, nullptr, q);
  } else {
    be.Matmul(x, *wq_, nullptr, q);
  }
  be.Rope(q.Reshaped({t, c_.num_heads, qk}), ctx.positions, rope_);
  return q;
}

void MlaAttention::WriteLatent(StepContext& ctx, const Tensor& x) {
  Backend& be = ctx.backend;
  const MlaConfig& m = c_.mla;
  const int64_t t = ctx.t, r = m.kv_lora_rank, dr = m.qk_rope_head_dim;
  Tensor kv = ctx.ws.Take(t, r + dr), c = ctx.ws.Take(t, r);
  be.Matmul(x, wkv_a_, nullptr, kv);  // [T, kv_lora | k_rope]
  RopeTable k_rope = rope_;
  k_rope.rotary_offset = int(r);
  be.Rope(kv.Reshaped({t, 1, r + dr}), ctx.positions, k_rope);
  be.CopyColumns(kv, 0, c, 0, r);  // only the latent part is normalised, not k_rope
  be.RmsNorm(c, kv_a_norm_, m.latent_norm_eps, c);
  be.CopyColumns(c, 0, kv, 0, r);  // kv now holds the cache rows [latent | k_rope]
  for (const Segment& s : ctx.segments) {
    be.ScatterRows(kv.RowSlice(s.row0, s.rows), s.new_rows(), s.cache->layer(ctx.layer).latent);
  }
}

void MlaAttention::Forward(StepContext& ctx, const Tensor& x, const Tensor& out) {
  Backend& be = ctx.backend;
  const MlaConfig& m = c_.mla;
  const int64_t t = ctx.t, n_h = c_.num_heads, r = m.kv_lora_rank, dr = m.qk_rope_head_dim,
                qk = m.qk_nope_head_dim + dr;
  Tensor q_latent;
  const Tensor q = Query(ctx, x, &q_latent);
  WriteLatent(ctx, x);

  if (uses_dsa_) {
    if (indexer_) indexer_->Select(ctx, x, q_latent);
    CHECK(ctx.dsa->valid);  // a shared layer reuses the last full layer's choice
    if (ctx.observer && ctx.observer->on_key_selection) {
      ctx.observer->on_key_selection(ctx.layer, ctx.dsa->View());
    }
  }

  // Query in latent space: [q_nope . W_k (per head) | q_rope].
  Tensor q_lat = ctx.ws.Take(t, n_h * (r + dr));
  be.HeadMatmul(q, qk, w_k_absorb_, q_lat, r + dr);
  be.CopyColumns(q.Reshaped({t * n_h, qk}), m.qk_nope_head_dim, q_lat.Reshaped({t * n_h, r + dr}),
                 r, dr);
  Tensor o_lat = ctx.ws.Take(t, n_h * r), o = ctx.ws.Take(t, n_h * m.v_head_dim);
  for (const Segment& s : ctx.segments) {
    // While a segment's last query sees at most top-k keys, the indexer keeps
    // every key of every query, in order (SelectTopK): that is dense causal
    // attention, and the backend's dense prefill kernel does it without the
    // per-query gather (same keys, same order, so the same sums).
    const bool sparse = uses_dsa_ && s.n_past + s.rows > ctx.dsa->stride;
    const KeySelection selection = sparse ? ctx.dsa->View(s) : KeySelection{};
    be.LatentAttention(q_lat.RowSlice(s.row0, s.rows).Reshaped({s.rows, n_h, r + dr}),
                       s.cache->layer(ctx.layer).latent, r, s.cache->rows(), s.n_past,
                       c_.AttentionScale(), sparse ? &selection : nullptr,
                       o_lat.RowSlice(s.row0, s.rows).Reshaped({s.rows, n_h, r}));
  }
  be.HeadMatmul(o_lat, r, w_v_absorb_, o, m.v_head_dim);
  be.Matmul(o, wo_, nullptr, out);
}

}  // namespace anymoe
