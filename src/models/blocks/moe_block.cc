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
  // router logits, gathered tokens, expert output, the MLP's gate/up
  return Workspace::Footprint(t, c_.moe.num_experts) + 2 * Workspace::Footprint(t, h) +
         2 * Workspace::Footprint(t, ffn);
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

  be.Zero(out);
  const int64_t ffn = std::max(c_.moe.expert_ffn, c_.moe.shared_ffn);
  Tensor xe = ctx.ws.Take(t, h), ye = ctx.ws.Take(t, h), g = ctx.ws.Take(t, ffn),
         u = ctx.ws.Take(t, ffn);
  for (int64_t e = 0; e < c_.moe.num_experts; ++e) {
    const int32_t begin = offsets_[size_t(e)], n = offsets_[size_t(e) + 1] - begin;
    if (n == 0) continue;  // experts nobody chose cost nothing
    const auto rows = std::span<const int32_t>(rows_).subspan(size_t(begin), size_t(n));
    Tensor xs = xe.RowSlice(0, n), ys = ye.RowSlice(0, n);
    be.GatherRows(x, rows, xs);
    DenseMlp::Run(be, xs, experts_.gate[size_t(e)], experts_.up[size_t(e)],
                  experts_.down[size_t(e)], g, u, ys);
    be.ScatterAddRows(ys, rows, std::span<const float>(scales_).subspan(size_t(begin), size_t(n)),
                      out);
  }
  if (shared_) {
    Tensor ys = ye.RowSlice(0, t);
    DenseMlp::Run(be, x, shared_->gate(), shared_->up(), shared_->down(), g, u, ys);
    be.Add(out, ys, out);
  }
}

}  // namespace anymoe
