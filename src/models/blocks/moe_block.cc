#include "models/blocks/moe_block.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace anymoe {

Expected<std::unique_ptr<MoeBlock>> MoeBlock::Bind(WeightBinder& w, const ModelConfig& c,
                                                   int64_t i, int64_t max_step_tokens,
                                                   const ExpertParallelism* ep) {
  std::unique_ptr<MoeBlock> m(new MoeBlock(c));
  m->layer_ = i;
  const MoeConfig& s = c.moe;
  const int64_t h = c.hidden_size, e = s.num_experts, k = s.experts_per_token;
  m->prefix_ = c.arch == "mixtral" ? "block_sparse_moe" : "mlp";
  // Pruned (--expert-prune): the kept experts' router rows and biases, so
  // Route chooses among them exactly as among all with the others at -inf.
  ASSIGN_OR_RETURN(m->router_,
                   w.LayerExpertRows(i, m->prefix_ + ".gate.weight", {e, h}, m->router_rows_));
  if (s.selection_bias) {
    ASSIGN_OR_RETURN(m->selection_bias_, w.LayerExpertRows(i, "mlp.gate.e_score_correction_bias",
                                                           {e}, m->bias_rows_));
  }
  ASSIGN_OR_RETURN(m->experts_, w.Experts(i, m->prefix_ + ".experts", e, s.expert_ffn, h));
  if (m->experts_.streamed()) {
    const Tensor* parts[kExpertParts] = {&m->experts_.gate[0], &m->experts_.up[0],
                                         &m->experts_.down[0]};
    for (int p = 0; p < kExpertParts; ++p) {
      const Tensor& t = *parts[p];
      m->layout_.parts[size_t(p)] =
          ExpertMatrix{t.dtype, t.rows(), t.cols(), uint64_t(t.rows()) * t.row_bytes()};
      if (!m->experts_.scales.empty()) {  // FP8: each expert's grid, from a block's first row
        m->layout_.parts[size_t(p)].scale_bytes =
            m->experts_.scales[0][size_t(p)].GridBytes(t.rows(), t.cols());
      }
    }
    m->layout_.spans = m->experts_.spans;
    m->layout_.scales = m->experts_.scales;
  }
  if (ep != nullptr && ep->comm != nullptr) {
    if (m->experts_.streamed()) {
      return Status::Error("expert parallelism (--ep) and streamed experts (--expert-cache) do "
                           "not combine yet: use --expert-cache off with --ep");
    }
    m->parallel_.emplace(*ep->comm, ep->placement.owners(i), max_step_tokens * k);
    m->parallel_->set_swiglu_limit(c.swiglu_limit);
    m->overlap_exchange_ = ep->overlap;
  }
  if (s.shared_ffn > 0) {
    ASSIGN_OR_RETURN(m->shared_, DenseMlp::Bind(w, i, "mlp.shared_experts", h, s.shared_ffn,
                                                c.swiglu_limit));
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
  // Kept apart from the views, which ReplaceExpert rewrites on the model's
  // thread while an HTTP thread validates an upload against these.
  const Tensor* parts[kExpertParts] = {&m->experts_.gate[0], &m->experts_.up[0],
                                       &m->experts_.down[0]};
  for (int p = 0; p < kExpertParts; ++p) {
    const Tensor& t = *parts[p];
    m->expert_parts_[size_t(p)] =
        ExpertMatrix{t.dtype, t.rows(), t.cols(), uint64_t(t.rows()) * t.row_bytes()};
  }
  m->block_scaled_ = !m->experts_.scales.empty() || bool(m->experts_.gate[0].scales);
  return m;
}

uint64_t MoeBlock::workspace_floats(int64_t t) const {
  const int64_t h = c_.hidden_size, ffn = std::max(c_.moe.expert_ffn, c_.moe.shared_ffn);
  const int64_t m = t * c_.moe.experts_per_token;  // (token, expert) pairs
  // router logits, gathered rows and expert outputs, the MLPs' gate/up, and
  // for the next layer's prediction a normed copy of the rows and its logits
  return 2 * Workspace::Footprint(t, c_.moe.num_experts) + 2 * Workspace::Footprint(m, h) +
         2 * Workspace::Footprint(m, ffn) + Workspace::Footprint(t, h) +
         (parallel_ ? ExpertParallelLayer::WorkspaceFloats(m, h) + Workspace::Footprint(t, h)
                    : 0);
}

Expected<ReplaceableExperts> MoeBlock::Replaceable() const {
  const auto refuse = [&](const std::string& why) {
    return Status::Error("layer " + std::to_string(layer_) + ": experts cannot be replaced " + why,
                         ErrorKind::kInvalidArgument, "swap_unsupported");
  };
  // Streamed experts are read from the file by offset, and under expert
  // parallelism other ranks hold them: neither reads the views replaced here.
  if (experts_.streamed()) return refuse("while they stream from disk (--expert-cache)");
  if (parallel_) return refuse("under expert parallelism (--ep)");
  if (block_scaled_) return refuse("with block-scaled (FP8) weights");
  ReplaceableExperts r;
  r.num_experts = int64_t(experts_.gate.size());
  r.parts = expert_parts_;
  return r;
}

Status MoeBlock::ReplaceExpert(Backend& backend, int64_t expert,
                               const std::array<TensorInfo, kExpertParts>& parts,
                               std::shared_ptr<const void> storage) {
  ASSIGN_OR_RETURN(const ReplaceableExperts r, Replaceable());
  if (expert < 0 || expert >= r.num_experts) {
    return Status::Error("layer " + std::to_string(layer_) + " has no expert " +
                             std::to_string(expert),
                         ErrorKind::kInvalidArgument, "invalid_expert");
  }
  // Prepared first, swapped in together: a failure leaves the expert whole.
  std::array<Tensor, kExpertParts> prepared;
  for (int p = 0; p < kExpertParts; ++p) {
    const TensorInfo& info = parts[size_t(p)];
    const ExpertMatrix& m = r.parts[size_t(p)];
    if (info.dtype != m.dtype || info.shape != std::vector<int64_t>{m.rows, m.cols} ||
        info.bytes != m.bytes) {
      return Status::Error(info.name + ": not shaped as this layer's experts",
                           ErrorKind::kInvalidArgument, "invalid_shape");
    }
    ASSIGN_OR_RETURN(prepared[size_t(p)], backend.PrepareWeight(info));
  }
  replaced_storage_.push_back(std::move(storage));
  experts_.gate[size_t(expert)] = prepared[0];
  experts_.up[size_t(expert)] = prepared[1];
  experts_.down[size_t(expert)] = prepared[2];
  return Status::Ok();
}

void MoeBlock::AttachCache(ExpertCache* cache) {
  CHECK(experts_.streamed());
  cache_ = cache;
  streamed_.emplace(experts_.gate, experts_.up, experts_.down, layer_, cache);
  streamed_->set_swiglu_limit(c_.swiglu_limit);
}

void MoeBlock::SetLookahead(MoeBlock* next, const Tensor& next_norm, float eps) {
  next_ = next;
  next_norm_ = next_norm;
  norm_eps_ = eps;
}

Status MoeBlock::EnableSticky(Backend& backend, float threshold) {
  const int64_t e = c_.moe.num_experts;
  ASSIGN_OR_RETURN(sticky_bias_buffer_, backend.Allocate(uint64_t(e) * 4, "router bias"));
  sticky_bias_ = Tensor::Of(sticky_bias_buffer_->base(), DType::kF32, {e});
  host_bias_.assign(size_t(e), 0.0f);
  if (selection_bias_) backend.ReadF32(*selection_bias_, host_bias_);
  host_logits_.resize(size_t(e));
  host_selection_.resize(size_t(e));
  sticky_threshold_ = threshold;
  return Status::Ok();
}

void MoeBlock::StickToPrevious(Backend& be, const Tensor& logits) {
  const int64_t e = c_.moe.num_experts, k = spec_.experts_per_token;
  be.ReadF32(logits, host_logits_);
  // The selection scores Route chooses on (before group limits).
  float mx = *std::max_element(host_logits_.begin(), host_logits_.end()), sum = 0;
  for (int64_t i = 0; i < e; ++i) {
    const float l = host_logits_[size_t(i)];
    host_selection_[size_t(i)] = spec_.scoring == RouterSpec::Scoring::kSoftmax
                                     ? std::exp(l - mx)
                                     : 1.0f / (1.0f + std::exp(-l));
    sum += host_selection_[size_t(i)];
  }
  for (int64_t i = 0; i < e; ++i) {
    if (spec_.scoring == RouterSpec::Scoring::kSoftmax) host_selection_[size_t(i)] /= sum;
    host_selection_[size_t(i)] += host_bias_[size_t(i)];
  }
  std::nth_element(host_selection_.begin(), host_selection_.begin() + k, host_selection_.end(),
                   std::greater<float>());
  const float kth = *std::min_element(host_selection_.begin(), host_selection_.begin() + k);
  if (kth - host_selection_[size_t(k)] >= sticky_threshold_) return;
  // Unsure at the boundary: route to the previous token's experts, which are
  // likely still cached; Route weighs them by this token's scores.
  for (int64_t i = 0; i < e; ++i) host_selection_[size_t(i)] = host_bias_[size_t(i)];
  for (int32_t id : previous_ids_) host_selection_[size_t(id)] += 1e30f;
  be.WriteF32(host_selection_, sticky_bias_);
  be.Route(logits, &sticky_bias_, spec_, std::span(ids_).first(size_t(k)),
           std::span(weights_).first(size_t(k)));
  ++sticky_routings_;
}

void MoeBlock::PredictNext(StepContext& ctx) {
  if (next_ == nullptr || cache_ == nullptr || !cache_->prefetch_enabled() ||
      ctx.residual == nullptr) {
    return;
  }
  Backend& be = ctx.backend;
  const int64_t t = ctx.t, k = next_->spec_.experts_per_token;
  Tensor normed = ctx.ws.Take(t, c_.hidden_size);
  Tensor logits = ctx.ws.Take(t, next_->c_.moe.num_experts);
  be.RmsNorm(*ctx.residual, next_norm_, norm_eps_, normed);
  be.Matmul(normed, next_->router_, nullptr, logits);
  predicted_ids_.resize(size_t(t * k));
  predicted_weights_.resize(size_t(t * k));
  be.Route(logits, next_->selection_bias_ ? &*next_->selection_bias_ : nullptr, next_->spec_,
           predicted_ids_, predicted_weights_);
  cache_->Prefetch(next_->layer_, predicted_ids_);
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
  if (sticky_threshold_ > 0) {
    // Only a lone sequence's tokens have a well-defined previous token.
    const bool one = ctx.segments.size() == 1;
    if (one && t == 1 && int64_t(previous_ids_.size()) == k && ctx.segments[0].n_past > 0) {
      StickToPrevious(be, logits);
    }
    if (one) {
      previous_ids_.assign(ids.end() - k, ids.end());
    } else {
      previous_ids_.clear();
    }
  }
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
  Tensor shared_out;  // the shared expert's output, once computed
  bool shared_done = false;
  if (streamed_) {
    Status st = streamed_->Run(be, xe, offsets_, g, u, ye, [&] { PredictNext(ctx); });
    if (!st.ok()) {
      ctx.status = st;
      be.Zero(out);
      return;
    }
  } else if (parallel_) {
    // This rank's experts; while every rank's outputs travel, the shared
    // expert (into a buffer of its own: the sums below keep their order, so
    // the result is the one-process result bit for bit); then every rank's
    // outputs in the single-process order.
    Status st = parallel_->Start(be, ctx.ws, xe, offsets_, experts_.gate, experts_.up,
                                 experts_.down, g, u);
    if (st.ok() && shared_ && overlap_exchange_) {
      shared_out = ctx.ws.Take(t, h);
      shared_->Run(be, x, g_buf, u_buf,
                    shared_out);
      be.Synchronize();
      shared_done = true;
    }
    if (st.ok()) st = parallel_->Finish(be, ye);
    if (!st.ok()) {
      ctx.status = st;
      be.Zero(out);
      return;
    }
  } else {
    const GroupedProjection gate_up[] = {{experts_.gate, g}, {experts_.up, u}};  // [M, I] each
    be.MultiGroupedMatmul(xe, gate_up, offsets_);
    be.SwiGluLimited(g, u, c_.swiglu_limit, g);
    be.GroupedMatmul(g, experts_.down, offsets_, ye);  // [M, H]
  }
  if (ctx.observer && ctx.observer->on_expert_outputs) {
    ctx.observer->on_expert_outputs(RoutedExpertOutputs{
        be, ctx.layer, t, logits, spec_.scoring, offsets_, rows,
        std::span<const float>(scales_).first(size_t(m)), ye});
  }
  be.Zero(out);
  // Per token, contributions add in ascending expert order, as the reference does.
  be.ScatterAddRows(ye, rows, std::span<const float>(scales_).first(size_t(m)), out);
  if (shared_) {
    if (!shared_done) {
      shared_out = ye.RowSlice(0, t);
      shared_->Run(be, x, g_buf, u_buf,
                    shared_out);
    }
    be.Add(out, shared_out, out);
  }
}

}  // namespace anymoe
