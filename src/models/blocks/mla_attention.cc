#include "models/blocks/mla_attention.h"

#include <algorithm>
#include <vector>

namespace anymoe {

Expected<std::unique_ptr<AttentionBlock>> MlaAttention::Bind(WeightBinder& w, Backend& backend,
                                                             const ModelConfig& c, int64_t i,
                                                             const RopeTable& rope, MlaForm form,
                                                             std::span<const int32_t> key_order,
                                                             int64_t budget_floats) {
  std::unique_ptr<MlaAttention> a(new MlaAttention(c, rope));
  const MlaConfig& m = c.mla;
  const int64_t max_keys = int64_t(key_order.size());
  if (form == MlaForm::kExpanded && c.dsa.topk > 0 && c.dsa.topk < max_keys) {
    // Past index_topk keys each query attends its own selection, which only
    // the absorbed form runs: forcing "expanded" could not hold for a whole
    // prompt, and its bits would depend on the chunking after all. (With
    // index_topk >= the context DSA keeps every key: dense MLA.)
    return Status::Error("--mla-form expanded: this model selects keys with DSA (index_topk " +
                         std::to_string(c.dsa.topk) + " < the context " + std::to_string(max_keys) +
                         "), which runs in the absorbed form; use absorbed or auto");
  }
  if (form != MlaForm::kAbsorbed && max_keys < 1) {
    return Status::Error("--mla-form " + std::string(MlaFormName(form)) + ": no context length");
  }
  a->form_ = form;
  a->max_keys_ = form == MlaForm::kAbsorbed ? 0 : max_keys;
  a->key_order_ = key_order;
  a->group_ = ExpandedMlaHeadGroup(m, c.num_heads, a->max_keys_, budget_floats);
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
    if (c.indexer_kinds[size_t(i)] == IndexerKind::kFull && c.kpool.pool > 0) {
      ASSIGN_OR_RETURN(a->kpool_, KPoolIndexer::Bind(w, c, i));
    } else if (c.indexer_kinds[size_t(i)] == IndexerKind::kFull) {
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
// then [n_h, d_v, kv_lora]; with the expanded form enabled, also kv_b_proj
// rebuilt from them (f32, [n_h * (d_nope + d_v), kv_lora]).
Status MlaAttention::WriteAbsorbed(Backend& backend, std::span<const float> wk,
                                   std::span<const float> wv) {
  const MlaConfig& m = c_.mla;
  const int64_t n_h = c_.num_heads, r = m.kv_lora_rank, dn = m.qk_nope_head_dim, dv = m.v_head_dim;
  ASSIGN_OR_RETURN(absorbed_, backend.Allocate((wk.size() + wv.size()) * sizeof(float),
                                               "absorbed MLA weights"));
  w_k_absorb_ = Tensor::Of(absorbed_->base(), DType::kF32, {n_h, r, dn});
  w_v_absorb_ = Tensor::Of(absorbed_->base(), DType::kF32, {n_h, dv, r});
  w_v_absorb_.offset = wk.size() * sizeof(float);
  backend.WriteF32(wk, w_k_absorb_);
  backend.WriteF32(wv, w_v_absorb_);
  if (form_ == MlaForm::kAbsorbed) return Status::Ok();

  std::vector<float> kv_b(size_t(n_h * (dn + dv) * r));
  for (int64_t h = 0; h < n_h; ++h) {
    float* rows = kv_b.data() + h * (dn + dv) * r;
    for (int64_t i = 0; i < dn; ++i) {
      for (int64_t j = 0; j < r; ++j) rows[i * r + j] = wk[size_t((h * r + j) * dn + i)];
    }
    std::copy_n(wv.begin() + h * dv * r, dv * r, rows + dn * r);
  }
  ASSIGN_OR_RETURN(expand_buffer_,
                   backend.Allocate(kv_b.size() * sizeof(float), "expanded MLA weights"));
  w_expand_ = Tensor::Of(expand_buffer_->base(), DType::kF32, {n_h * (dn + dv), r});
  backend.WriteF32(kv_b, w_expand_);
  return Status::Ok();
}

LayerCacheSpec MlaAttention::cache_spec() const {
  LayerCacheSpec s;
  s.latent_dim = c_.mla.kv_lora_rank + c_.mla.qk_rope_head_dim;
  if (indexer_) s.index_dim = c_.dsa.head_dim;
  if (kpool_) s.index_dim = kpool_->cache_dim();
  return s;
}

AttentionShape MlaAttention::attention_shape() const {
  if (form_ == MlaForm::kAbsorbed) return {};
  const MlaConfig& m = c_.mla;
  return {group_, group_, m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim};
}

LatentShape MlaAttention::latent_shape() const {
  // Either form: the expanded one runs LatentAttention past its key budget and
  // for DSA selections (Expands).
  const MlaConfig& m = c_.mla;
  return {c_.num_heads, m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank};
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
  if (kpool_) f += kpool_->workspace_floats(t);
  if (form_ != MlaForm::kAbsorbed) {
    // ExpandedAttention: the segment's latent rows and their kv_lora part,
    // one head group's k_nope|v, keys and values, and its queries and outputs.
    const int64_t g = group_, s = max_keys_, dn = m.qk_nope_head_dim, dv = m.v_head_dim;
    f += Workspace::Footprint(s, r + dr) + Workspace::Footprint(s, r) +
         Workspace::Footprint(s, g * (dn + dv)) + Workspace::Footprint(s, g * (dn + dr)) +
         Workspace::Footprint(s, g * dv) + Workspace::Footprint(t, g * (dn + dr)) +
         Workspace::Footprint(t, g * dv);
  }
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
  if (m.qk_rope_head_dim > 0) be.Rope(q.Reshaped({t, c_.num_heads, qk}), ctx.positions, rope_);
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
  if (dr > 0) be.Rope(kv.Reshaped({t, 1, r + dr}), ctx.positions, k_rope);
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
    if (kpool_) kpool_->Select(ctx, x, q_latent);
    CHECK(ctx.dsa->valid);  // a shared layer reuses the last full layer's choice
    if (ctx.observer && ctx.observer->on_key_selection) {
      ctx.observer->on_key_selection(ctx.layer, ctx.dsa->View());
    }
  }

  // Which segments expand (no container: a warm decode step allocates nothing).
  int64_t expanded = 0, keys = 0, rows = 0;
  for (const Segment& s : ctx.segments) {
    if (!Expands(ctx, s)) continue;
    ++expanded;
    keys = std::max(keys, s.n_past + s.rows);
    rows = std::max(rows, s.rows);
  }
  Tensor o = ctx.ws.Take(t, n_h * m.v_head_dim);
  if (expanded < int64_t(ctx.segments.size())) {
    // Query in latent space: [q_nope . W_k (per head) | q_rope]. One call for
    // the whole step when every segment runs absorbed (decode steps), else one
    // per absorbed segment.
    Tensor q_lat = ctx.ws.Take(t, n_h * (r + dr)), o_lat = ctx.ws.Take(t, n_h * r);
    auto project_in = [&](int64_t row0, int64_t n) {
      const Tensor qs = q.RowSlice(row0, n), qls = q_lat.RowSlice(row0, n);
      be.HeadMatmul(qs, qk, w_k_absorb_, qls, r + dr);
      be.CopyColumns(qs.Reshaped({n * n_h, qk}), m.qk_nope_head_dim,
                     qls.Reshaped({n * n_h, r + dr}), r, dr);
    };
    auto project_out = [&](int64_t row0, int64_t n) {
      be.HeadMatmul(o_lat.RowSlice(row0, n), r, w_v_absorb_, o.RowSlice(row0, n), m.v_head_dim);
    };
    const bool whole_step = expanded == 0;
    if (whole_step) project_in(0, t);
    for (const Segment& s : ctx.segments) {
      if (!whole_step && Expands(ctx, s)) continue;
      if (!whole_step) project_in(s.row0, s.rows);
      // While a segment's last query sees at most top-k keys, the indexer keeps
      // every key of every query, in order (SelectTopK): that is dense causal
      // attention, and the backend's dense prefill kernel does it without the
      // per-query gather (same keys, same order, so the same sums).
      // (KPool without its tail: a query does not even see itself until its
      // pool completes, so never dense.)
      const bool sparse = uses_dsa_ && (s.n_past + s.rows > ctx.dsa->stride ||
                                        (c_.kpool.pool > 0 && !c_.kpool.select_tail));
      const KeySelection selection = sparse ? ctx.dsa->View(s) : KeySelection{};
      be.LatentAttention(q_lat.RowSlice(s.row0, s.rows).Reshaped({s.rows, n_h, r + dr}),
                         s.cache->layer(ctx.layer).latent, r, s.cache->rows(), s.n_past,
                         c_.AttentionScale(), sparse ? &selection : nullptr,
                         o_lat.RowSlice(s.row0, s.rows).Reshaped({s.rows, n_h, r}));
      if (!whole_step) project_out(s.row0, s.rows);
    }
    if (whole_step) project_out(0, t);
  }
  if (expanded > 0) {
    // One scratch for every expanded segment of the step (the plan holds one),
    // sized by the longest.
    const int64_t g = group_, dn = m.qk_nope_head_dim, dv = m.v_head_dim;
    const ExpandScratch scratch{ctx.ws.Take(keys, r + dr),        ctx.ws.Take(keys, r),
                                ctx.ws.Take(keys, g * (dn + dv)), ctx.ws.Take(keys, g * qk),
                                ctx.ws.Take(keys, g * dv),        ctx.ws.Take(rows, g * qk),
                                ctx.ws.Take(rows, g * dv)};
    for (const Segment& s : ctx.segments) {
      if (Expands(ctx, s)) ExpandedAttention(ctx, q, s, scratch, o);
    }
  }
  be.Matmul(o, wo_, nullptr, out);
}

bool MlaAttention::Expands(const StepContext& ctx, const Segment& s) const {
  const int64_t keys = s.n_past + s.rows;
  if (form_ == MlaForm::kAbsorbed || keys > max_keys_) return false;
  // Sparse segments attend their DSA selection, which only the absorbed form runs.
  if (uses_dsa_ && (keys > ctx.dsa->stride || (c_.kpool.pool > 0 && !c_.kpool.select_tail))) {
    return false;
  }
  return form_ == MlaForm::kExpanded ||
         ExpandedMlaIsCheaper(c_.mla, c_.num_heads, s.rows, s.n_past);
}

// Per group of g heads: k_nope|v for every key of the segment from its latent
// rows (one matmul with kv_b_proj's rows of those heads), keys [S, g, d_nope |
// rope] with the shared rope key copied into each head, values [S, g, d_v],
// then causal attention of the segment's queries as in GQA with g kv heads.
void MlaAttention::ExpandedAttention(StepContext& ctx, const Tensor& q, const Segment& s,
                                     const ExpandScratch& scratch, const Tensor& o) {
  Backend& be = ctx.backend;
  const MlaConfig& m = c_.mla;
  const int64_t n_h = c_.num_heads, r = m.kv_lora_rank, dr = m.qk_rope_head_dim,
                dn = m.qk_nope_head_dim, dv = m.v_head_dim, qk = dn + dr, t = s.rows,
                keys = s.n_past + s.rows, g = group_;
  const Tensor latent = scratch.latent.RowSlice(0, keys), c = scratch.c.RowSlice(0, keys),
               kv = scratch.kv.RowSlice(0, keys), k = scratch.k.RowSlice(0, keys),
               v = scratch.v.RowSlice(0, keys), qg = scratch.q.RowSlice(0, t),
               og = scratch.o.RowSlice(0, t);
  be.GatherRows(s.cache->layer(ctx.layer).latent, s.cache->rows().first(size_t(keys)), latent);
  be.CopyColumns(latent, 0, c, 0, r);
  const Tensor q_seg = q.RowSlice(s.row0, t), o_seg = o.RowSlice(s.row0, t);
  const std::span<const int32_t> rows = key_order_.first(size_t(keys));
  for (int64_t h0 = 0; h0 < n_h; h0 += g) {
    be.Matmul(c, w_expand_.RowSlice(h0 * (dn + dv), g * (dn + dv)), nullptr, kv);
    for (int64_t j = 0; j < g; ++j) {
      be.CopyColumns(kv, j * (dn + dv), k, j * qk, dn);
      be.CopyColumns(latent, r, k, j * qk + dn, dr);
      be.CopyColumns(kv, j * (dn + dv) + dn, v, j * dv, dv);
    }
    be.CopyColumns(q_seg, h0 * qk, qg, 0, g * qk);
    be.Attention(qg.Reshaped({t, g, qk}), k.Reshaped({keys, g, qk}), v.Reshaped({keys, g, dv}),
                 rows, s.n_past, c_.AttentionScale(), og.Reshaped({t, g, dv}));
    be.CopyColumns(og, 0, o_seg, h0 * dv, g * dv);
  }
}

}  // namespace anymoe
