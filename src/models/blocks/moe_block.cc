#include "models/blocks/moe_block.h"

namespace anymoe {

Expected<std::unique_ptr<MoeBlock>> MoeBlock::Bind(WeightBinder& w, const ModelConfig& c,
                                                   int64_t i, int64_t max_step_tokens) {
  std::unique_ptr<MoeBlock> m(new MoeBlock(c));
  const MoeConfig& s = c.moe;
  const int64_t h = c.hidden_size, e = s.num_experts, k = s.experts_per_token;
  m->prefix_ = c.arch == "mixtral" ? "block_sparse_moe" : "mlp";
  ASSIGN_OR_RETURN(m->router_, w.Layer(i, m->prefix_ + ".gate.weight", {e, h}));
  if (s.selection_bias) {
    ASSIGN_OR_RETURN(m->selection_bias_, w.Layer(i, "mlp.gate.e_score_correction_bias", {e}));
  }
  ASSIGN_OR_RETURN(m->experts_, w.Experts(i, m->prefix_ + ".experts", e, s.expert_ffn, h));
  if (s.shared_ffn > 0) {
    ASSIGN_OR_RETURN(m->shared_, DenseMlp::Bind(w, i, "mlp.shared_experts", h, s.shared_ffn));
  }
  m->spec_.scoring = s.scoring == MoeConfig::Scoring::kSigmoid ? RouterSpec::Scoring::kSigmoid
                                                               : RouterSpec::Scoring::kSoftmax;
  m->spec_.experts_per_token = int(k);
  m->spec_.n_group = int(s.n_group);
  m->spec_.topk_group = int(s.topk_group);
  m->spec_.normalize = s.norm_topk_prob;
  m->spec_.scaling = s.routed_scaling_factor;
  m->ids_.resize(size_t(max_step_tokens * k));
  m->weights_.resize(size_t(max_step_tokens * k));
  m->rows_.resize(size_t(max_step_tokens * k));
  m->scales_.resize(size_t(max_step_tokens * k));
  m->offsets_.resize(size_t(e + 1));
  m->cursor_.resize(size_t(e));
  m->counts_.assign(size_t(e), 0);
  return m;
}

uint64_t MoeBlock::workspace_floats(int64_t t) const {
  const int64_t h = c_.hidden_size, ffn = std::max(c_.moe.expert_ffn, c_.moe.shared_ffn);
  const int64_t m = t * c_.moe.experts_per_token;  // (token, expert) pairs
  // router logits, gathered rows and expert outputs, the MLPs' gate/up
  return Workspace::Footprint(t, c_.moe.num_experts) + 2 * Workspace::Footprint(m, h) +
         2 * Workspace::Footprint(m, ffn);
}

void MoeBlock::GroupByExpert(int64_t t) {
  const int64_t k = spec_.experts_per_token, e = c_.moe.num_experts;
  std::fill(offsets_.begin(), offsets_.end(), 0);
  for (int64_t i = 0; i < t * k; ++i) ++offsets_[size_t(ids_[size_t(i)]) + 1];
  for (int64_t x = 0; x < e; ++x) {
    counts_[size_t(x)] += offsets_[size_t(x) + 1];
    offsets_[size_t(x) + 1] += offsets_[size_t(x)];
  }
  // Counting sort, stable in token order, so results do not depend on the batch.
  std::copy(offsets_.begin(), offsets_.end() - 1, cursor_.begin());
  for (int64_t i = 0; i < t * k; ++i) {
    const size_t slot = size_t(cursor_[size_t(ids_[size_t(i)])]++);
    rows_[slot] = int32_t(i / k);
    scales_[slot] = weights_[size_t(i)];
  }
}

void MoeBlock::Forward(StepContext& ctx, const Tensor& x, const Tensor& out) {
  Backend& be = ctx.backend;
  const int64_t t = ctx.t, h = c_.hidden_size, k = spec_.experts_per_token;
  Tensor logits = ctx.ws.Take(t, c_.moe.num_experts);
  be.Matmul(x, router_, nullptr, logits);  // f32 x f32 weights (converted at load if needed)
  const auto ids = std::span(ids_).first(size_t(t * k));
  be.Route(logits, selection_bias_ ? &*selection_bias_ : nullptr, spec_, ids,
           std::span(weights_).first(size_t(t * k)));
  if (ctx.observer && ctx.observer->on_route) ctx.observer->on_route(ctx.layer, ids, k);
  GroupByExpert(t);

  // Rows sorted by expert: each expert multiplies only its own tokens, all
  // experts in one grouped call per projection (experts nobody chose cost nothing).
  const int64_t m = t * k, ffn = std::max(c_.moe.expert_ffn, c_.moe.shared_ffn);
  const auto rows = std::span<const int32_t>(rows_).first(size_t(m));
  Tensor xe = ctx.ws.Take(m, h), ye = ctx.ws.Take(m, h);
  const Tensor g_buf = ctx.ws.Take(m, ffn), u_buf = ctx.ws.Take(m, ffn);
  const Tensor g = g_buf.Prefix(m, c_.moe.expert_ffn), u = u_buf.Prefix(m, c_.moe.expert_ffn);
  be.GatherRows(x, rows, xe);
  const GroupedProjection gate_up[] = {{experts_.gate, g}, {experts_.up, u}};  // [M, I] each
  be.MultiGroupedMatmul(xe, gate_up, offsets_);
  be.SwiGlu(g, u, g);
  be.GroupedMatmul(g, experts_.down, offsets_, ye);  // [M, H]
  be.Zero(out);
  // Per token, contributions add in ascending expert order, as the reference does.
  be.ScatterAddRows(ye, rows, std::span<const float>(scales_).first(size_t(m)), out);
  if (shared_) {
    Tensor ys = ye.RowSlice(0, t);
    DenseMlp::Run(be, x, shared_->gate(), shared_->up(), shared_->down(), g_buf, u_buf, ys);
    be.Add(out, ys, out);
  }
}

}  // namespace anymoe
