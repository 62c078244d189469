#include "models/decoder_model.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "models/blocks/dense_mlp.h"
#include "models/blocks/gqa_attention.h"
#include "models/blocks/kda_attention.h"
#include "models/blocks/mla_attention.h"
#include "models/config_loader.h"
#include "formats/gguf.h"
#include "models/weight_binder.h"

namespace anymoe {

Expected<std::unique_ptr<Model>> DecoderModel::Load(const ModelFile& file, ModelConfig config,
                                                    Backend& backend, const LoadOptions& options) {
  std::unique_ptr<DecoderModel> m(new DecoderModel(std::move(config), backend));
  m->max_step_tokens_ = options.max_step_tokens;
  m->kv_type_ = options.kv_type;
  if (options.mla_form != MlaForm::kAbsorbed && m->config_.attention != AttentionKind::kMla) {
    return Status::Error("--mla-form " + std::string(MlaFormName(options.mla_form)) +
                         ": the model has no multi-head latent attention (MLA)");
  }
  m->mla_form_ = options.mla_form;
  m->mla_expand_budget_ = options.mla_expand_budget_floats;
  if (options.mla_form != MlaForm::kAbsorbed) {
    // The expanded form's scratch holds one sequence's keys: at most the context.
    const int64_t max_keys = m->config_.max_position_embeddings > 0
                                 ? std::min(options.context, m->config_.max_position_embeddings)
                                 : options.context;
    m->mla_key_order_.resize(size_t(std::max<int64_t>(max_keys, 0)));
    std::iota(m->mla_key_order_.begin(), m->mla_key_order_.end(), 0);
  }
  RETURN_IF_ERROR(m->Bind(file, options));
  {  // --kv-type against the heads now, not at the first cache
    std::vector<LayerCacheSpec> specs;
    for (const Layer& L : m->layers_) specs.push_back(L.attention->cache_spec());
    RETURN_IF_ERROR(CheckKvLayers(m->kv_type_, specs));
  }
  RETURN_IF_ERROR(m->StartExpertCache(file, options));
  if (options.sticky_experts > 0 && !options.planning) {
    for (Layer& L : m->layers_) {
      if (L.moe) RETURN_IF_ERROR(L.moe->EnableSticky(backend, options.sticky_experts));
    }
  }
  RETURN_IF_ERROR(m->AllocateActivations());
  return std::unique_ptr<Model>(std::move(m));
}

Status DecoderModel::Bind(const ModelFile& file, const LoadOptions& options) {
  const ModelConfig& c = config_;
  // llama.cpp's `--mtp` files hold only the NextN layer (and the shared
  // embedding / head): they are no model by themselves.
  if (c.num_nextn_layers > 0 && file.gguf && file.gguf->Find("blk.0.attn_norm.weight") == nullptr &&
      file.gguf->Find("blk." + std::to_string(c.num_layers) + ".nextn.eh_proj.weight")) {
    return Status::Error(file.path + ": an MTP-only file (no trunk layers); load the trunk with "
                                     "-m and this file with --mtp-file");
  }
  rope_freq_ = ComputeRopeFrequencies(c.rope_theta, c.rotary_dims, c.rope_scaling,
                                      c.max_position_embeddings);
  // llama.cpp stores llama3-style scaling as per-frequency divisors.
  if (const TensorInfo* f = file.tensors().Find("rope_freqs.weight")) {
    if (f->dtype != DType::kF32 || f->elements() != int64_t(rope_freq_.inv_freq.size())) {
      return Status::Error(file.path + ": tensor 'rope_freqs.weight' must be f32 [" +
                           std::to_string(rope_freq_.inv_freq.size()) + "]");
    }
    const float* div = reinterpret_cast<const float*>(f->data);
    for (size_t i = 0; i < rope_freq_.inv_freq.size(); ++i) rope_freq_.inv_freq[i] /= div[i];
  }
  rope_.inv_freq = rope_freq_.inv_freq;
  rope_.rotary_dims = int(c.rotary_dims);
  rope_.attention_factor = rope_freq_.attention_factor;
  rope_.pairing = c.rope_pairing;

  WeightBinder w(file, backend_);
  w.set_stream_experts(options.expert_cache.enabled && c.is_moe());
  w.set_progress(options.progress);
  if (options.expert_subset != nullptr) {
    // The NextN layer's experts are not in the profile a subset comes from,
    // and expert placements number the file's experts.
    if (options.load_mtp || options.mtp_file != nullptr || options.expert_parallel != nullptr) {
      return Status::Error("expert pruning (--expert-prune) does not combine with " +
                               std::string(options.expert_parallel ? "--ep" : "--mtp") + " yet",
                           ErrorKind::kInvalidArgument, "prune_unsupported");
    }
    w.set_expert_subset(options.expert_subset);
    pruned_ = true;
  }
  expert_parallel_ = options.expert_parallel;
  if (expert_parallel_ != nullptr) {
    w.set_expert_placement(&expert_parallel_->placement, expert_parallel_->comm->rank());
  }
  ASSIGN_OR_RETURN(tok_embd_, w.Require("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
  ASSIGN_OR_RETURN(output_norm_, w.Require("model.norm.weight", {c.hidden_size}));
  if (c.tie_word_embeddings) {
    output_ = tok_embd_;
  } else {
    ASSIGN_OR_RETURN(output_, w.Require("lm_head.weight", {c.vocab_size, c.hidden_size}));
  }
  if (hyper_connected()) {
    // The streams and each token's mixing weights; the ones are the weight of
    // the streams' unweighted RMSNorm.
    const int64_t t = max_step_tokens_, n = c.hc.mult, nh = n * c.hidden_size;
    const uint64_t floats = Workspace::Footprint(t, nh) + Workspace::Footprint(t, n) +
                            Workspace::Footprint(t, n * n) + Workspace::Footprint(1, nh);
    ASSIGN_OR_RETURN(hc_buffer_, backend_.Allocate(floats * sizeof(float), "mHC streams"));
    uint64_t offset = 0;
    for (auto [s, cols, rows] : {std::tuple{&streams_, nh, t}, std::tuple{&hc_post_, n, t},
                                 std::tuple{&hc_comb_, n * n, t}, std::tuple{&hc_ones_, nh, int64_t(1)}}) {
      *s = Tensor::Of(hc_buffer_->base(), DType::kF32, {rows, cols});
      s->offset = offset;
      offset += Workspace::Footprint(rows, cols) * sizeof(float);
    }
    hc_ones_ = hc_ones_.Reshaped({nh});
    backend_.WriteF32(std::vector<float>(size_t(nh), 1.0f), hc_ones_);
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    w.set_cpu_experts(i < options.cpu_moe_layers);
    RETURN_IF_ERROR(BindLayer(w, i));
  }
  w.set_cpu_experts(false);  // the MTP layer's experts run where its attention does
  weight_bytes_ = w.bound_bytes();
  streamed_bytes_ = w.streamed_bytes();
  remote_expert_bytes_ = w.remote_bytes();
  // The MTP layer keeps all its experts on every rank.
  w.set_expert_placement(nullptr, 0);
  expert_parallel_ = nullptr;
  if (options.load_mtp || options.mtp_file != nullptr) RETURN_IF_ERROR(BindMtp(w, options));
  matrices_.insert(matrices_.end(), w.matrices().begin(), w.matrices().end());
  return Status::Ok();
}

Status DecoderModel::BindMtp(WeightBinder& trunk, const LoadOptions& options) {
  const ModelConfig& c = config_;
  std::optional<WeightBinder> separate;
  std::string where = "the model file";
  if (options.mtp_file != nullptr) {
    ASSIGN_OR_RETURN(const ModelConfig mtp_config, LoadModelConfig(*options.mtp_file));
    RETURN_IF_ERROR(CheckMtpFileMatches(c, mtp_config, options.mtp_file->path));
    separate.emplace(*options.mtp_file, backend_);
    where = options.mtp_file->path;
  } else if (c.num_nextn_layers == 0) {
    return Status::Error("the model declares no MTP (NextN) layer (num_nextn_predict_layers)");
  }
  WeightBinder& w = separate ? *separate : trunk;
  // The MTP layer's experts stay resident: the expert cache serves the trunk's
  // layers, and the draft layer runs for every token.
  w.set_stream_experts(false);
  auto mtp = MtpBlock::Bind(w, backend_, c, c.num_layers, rope_, max_step_tokens_, tok_embd_,
                            output_);
  if (!mtp.ok()) return mtp.status().WithContext("MTP layer in " + where);
  mtp_ = std::move(mtp).value();
  weight_bytes_ += mtp_->weight_bytes();
  if (separate) {  // a kind the trunk has too only repeats a bound
    matrices_.insert(matrices_.end(), separate->matrices().begin(), separate->matrices().end());
  }
  return Status::Ok();
}

Status DecoderModel::StartExpertCache(const ModelFile& file, const LoadOptions& options) {
  std::vector<const LayerExperts*> streamed(layers_.size(), nullptr);
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].moe) streamed[l] = layers_[l].moe->streamed_layout();
  }
  if (std::all_of(streamed.begin(), streamed.end(), [](auto* p) { return p == nullptr; })) {
    return Status::Ok();
  }
  if (options.planning) {
    ASSIGN_OR_RETURN(ExpertCache::Footprint f, ExpertCache::Plan(streamed, options.expert_cache));
    expert_cache_bytes_ = f.bytes;
    expert_cache_slots_ = f.slots;
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(expert_cache_,
                   ExpertCache::Create(file, streamed, options.expert_cache, &backend_));
  expert_cache_bytes_ = expert_cache_->stats().capacity_bytes;
  expert_cache_slots_ = expert_cache_->slots();
  size_t next = layers_.size();  // the next streamed MoE layer
  for (size_t l = layers_.size(); l-- > 0;) {
    MoeBlock* moe = layers_[l].moe;
    if (moe == nullptr || streamed[l] == nullptr) continue;
    moe->AttachCache(expert_cache_.get());
    if (next < layers_.size()) {
      moe->SetLookahead(layers_[next].moe, layers_[next].ffn_norm, config_.rms_norm_eps);
    }
    next = l;
  }
  return Status::Ok();
}

Status DecoderModel::BindLayer(WeightBinder& w, int64_t i) {
  const ModelConfig& c = config_;
  Layer L;
  ASSIGN_OR_RETURN(L.attn_norm, w.Layer(i, "input_layernorm.weight", {c.hidden_size}));
  ASSIGN_OR_RETURN(L.ffn_norm, w.Layer(i, "post_attention_layernorm.weight", {c.hidden_size}));
  if (hyper_connected()) {
    ASSIGN_OR_RETURN(L.attn_hc, HyperConnection::Bind(w, c, i, "attn", hc_ones_));
    ASSIGN_OR_RETURN(L.ffn_hc, HyperConnection::Bind(w, c, i, "ffn", hc_ones_));
  }
  if (c.is_linear(i)) {
    ASSIGN_OR_RETURN(L.attention, KdaAttention::Bind(w, backend_, c, i));
  } else if (c.attention == AttentionKind::kMla) {
    ASSIGN_OR_RETURN(L.attention, MlaAttention::Bind(w, backend_, c, i, rope_, mla_form_,
                                                     mla_key_order_, mla_expand_budget_));
  } else {
    ASSIGN_OR_RETURN(L.attention, GqaAttention::Bind(w, c, i, rope_));
  }
  if (c.ffn_kinds[size_t(i)] == FfnKind::kMoe) {
    ASSIGN_OR_RETURN(auto moe, MoeBlock::Bind(w, c, i, max_step_tokens_, expert_parallel_));
    L.moe = moe.get();
    L.ffn = std::move(moe);
  } else {
    ASSIGN_OR_RETURN(L.ffn, DenseMlp::Bind(w, i, "mlp", c.hidden_size, c.intermediate_size,
                                           c.swiglu_limit));
  }
  layers_.push_back(std::move(L));
  return Status::Ok();
}

Status DecoderModel::AllocateActivations() {
  const int64_t t = max_step_tokens_, h = config_.hidden_size;
  const uint64_t stream_floats = 4 * Workspace::Footprint(t, h) +
                                 Workspace::Footprint(t, config_.vocab_size);
  ASSIGN_OR_RETURN(stream_buffer_, backend_.Allocate(stream_floats * sizeof(float), "activations"));
  uint64_t offset = 0;
  for (Tensor* s : {&x_, &xn_, &y_, &normed_, &logits_}) {
    const int64_t cols = s == &logits_ ? config_.vocab_size : h;
    *s = Tensor::Of(stream_buffer_->base(), DType::kF32, {t, cols});
    s->offset = offset;
    offset += Workspace::Footprint(t, cols) * sizeof(float);
  }
  uint64_t scratch = 0;
  for (const Layer& L : layers_) {
    scratch = std::max({scratch, L.attention->workspace_floats(t), L.ffn->workspace_floats(t)});
    if (L.attn_hc) scratch = std::max(scratch, L.attn_hc->workspace_floats(t));
  }
  if (mtp_) {
    // ForwardMtp takes [t, 2 hidden] for eh_proj's input before the blocks run.
    scratch = std::max({scratch, mtp_->workspace_floats(t), Workspace::Footprint(t, 2 * h)});
  }
  RETURN_IF_ERROR(workspace_.Allocate(backend_, scratch));
  activation_bytes_ = stream_floats * sizeof(float) + workspace_.bytes() +
                      (hc_buffer_ ? hc_buffer_->size() : 0);
  positions_.resize(size_t(t));
  step_ids_.resize(size_t(t));
  if (config_.dsa.topk > 0) {
    // KPool selections also hold the query's unfinished pool.
    const int64_t widest = config_.dsa.topk + std::max<int64_t>(config_.kpool.pool - 1, 0);
    dsa_.keys.resize(size_t(t * widest));
    dsa_.counts.resize(size_t(t));
    loaded_topk_ = config_.dsa.topk;
  }
  return Status::Ok();
}

Expected<ReplaceableExperts> DecoderModel::ReplaceableExpertsOf(int64_t layer) const {
  if (layer < 0 || layer >= int64_t(layers_.size()) || layers_[size_t(layer)].moe == nullptr) {
    return Status::Error("layer " + std::to_string(layer) + " is not a MoE layer of this model",
                         ErrorKind::kInvalidArgument, "not_moe_layer");
  }
  // Pruned models number their experts by the subset, uploads by the file.
  if (pruned_) {
    return Status::Error("experts cannot be replaced in a pruned model (--expert-prune)",
                         ErrorKind::kInvalidArgument, "swap_unsupported");
  }
  return layers_[size_t(layer)].moe->Replaceable();
}

Status DecoderModel::ReplaceExpert(int64_t layer, int64_t expert,
                                   const std::array<TensorInfo, kExpertParts>& parts,
                                   std::shared_ptr<const void> storage) {
  RETURN_IF_ERROR(ReplaceableExpertsOf(layer).status());
  return layers_[size_t(layer)].moe->ReplaceExpert(backend_, expert, parts, std::move(storage));
}

Status DecoderModel::SetIndexTopK(int64_t topk) {
  if (loaded_topk_ == 0) return Model::SetIndexTopK(topk);
  if (topk < 1 || topk > loaded_topk_) {
    return Status::Error("index_topk " + std::to_string(topk) + " is outside [1, " +
                         std::to_string(loaded_topk_) +
                         "] (the model's own index_topk sizes its key selections)");
  }
  config_.dsa.topk = topk;  // the indexers read it at each step
  return Status::Ok();
}

ContextShape DecoderModel::context_shape(int64_t max_keys, bool mtp) const {
  ContextShape s;
  s.max_keys = max_keys;
  s.step_tokens = max_step_tokens_;
  auto add = [&s](const AttentionBlock& a) {
    const AttentionShape shape = a.attention_shape();
    if (shape.q_heads > 0 &&
        std::find(s.attention.begin(), s.attention.end(), shape) == s.attention.end()) {
      s.attention.push_back(shape);
    }
    if (const LatentShape l = a.latent_shape(); l.heads > 0) s.latent = l;
  };
  if (mtp) {
    add(mtp_->attention());
  } else {
    for (const Layer& L : layers_) add(*L.attention);
  }
  if (config_.dsa.topk > 0) s.indexer = IndexerShape{config_.dsa.n_heads, config_.dsa.head_dim};
  for (const WeightBinder::BoundMatrix& m : matrices_) {
    MatmulInput in{m.dtype, m.in, 1, 1};
    if (m.expert) {  // a routed expert's rows: top-k per token, over all experts
      in.rows_per_token = config_.moe.experts_per_token;
      in.groups = config_.moe.num_experts;
    }
    s.matmuls.push_back(in);
  }
  return s;
}

Expected<std::unique_ptr<KvPool>> DecoderModel::NewPool(int64_t tokens, int64_t max_sequence) {
  RETURN_IF_ERROR(backend_.ReserveForContext(context_shape(std::min(tokens, max_sequence), false)));
  std::vector<LayerCacheSpec> specs;
  for (const Layer& L : layers_) specs.push_back(L.attention->cache_spec());
  const int64_t b = KvPool::kDefaultBlockTokens;
  return KvPool::Create(backend_, (tokens + b - 1) / b, b, specs, kv_type_);
}

Status DecoderModel::PlanStep(std::span<const SequenceStep> steps) {
  int64_t total = 0;
  for (const SequenceStep& s : steps) total += int64_t(s.tokens.size());
  if (steps.empty() || total > max_step_tokens_) {
    return Status::Error("forward step of " + std::to_string(total) + " tokens (allowed 1.." +
                         std::to_string(max_step_tokens_) + ")");
  }
  for (const SequenceStep& s : steps) {
    if (s.tokens.empty()) return Status::Error("a sequence step has no tokens");
    for (int32_t id : s.tokens) {
      if (id < 0 || id >= config_.vocab_size) {
        return Status::Error("token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " +
                             std::to_string(config_.vocab_size) + ")");
      }
    }
  }
  segments_.clear();
  logit_rows_.clear();
  embedding_rows_.clear();
  int64_t row = 0;
  for (const SequenceStep& s : steps) {
    const int64_t n = int64_t(s.tokens.size()), past = s.cache->length();
    RETURN_IF_ERROR(s.cache->Reserve(past + n));  // blocks stay with the sequence on failure
    segments_.push_back(Segment{row, n, s.cache, past, s.token_by_token});
    for (int64_t i = 0; i < n; ++i) {
      positions_[size_t(row + i)] = int32_t(past + i);
      step_ids_[size_t(row + i)] = s.tokens[size_t(i)];
    }
    for (int64_t i = s.all_logits ? 0 : n - 1; i < n; ++i) logit_rows_.push_back(int32_t(row + i));
    for (int64_t i = 0; s.embeddings && i < n; ++i) embedding_rows_.push_back(int32_t(row + i));
    row += n;
  }
  return Status::Ok();
}

Expected<Tensor> DecoderModel::ForwardBatch(std::span<const SequenceStep> steps) {
  RETURN_IF_ERROR(PlanStep(steps));
  const int64_t t = segments_.back().row0 + segments_.back().rows;
  StepContext ctx = StartStep(t);

  const Tensor x = x_.RowSlice(0, t), xn = xn_.RowSlice(0, t), y = y_.RowSlice(0, t);
  backend_.Embedding(tok_embd_, std::span<const int32_t>(step_ids_).first(size_t(t)), x);
  if (hyper_connected()) {
    RETURN_IF_ERROR(CheckRecurrentState());
    ForwardHyperConnected(ctx, t);
    if (!ctx.status.ok()) return ctx.status;  // the step's tokens are not committed
    for (const Segment& s : segments_) {
      s.cache->set_length(s.n_past + s.rows);
      s.cache->set_state_tokens(s.n_past + s.rows);
    }
    return Logits(x, output_norm_, config_.rms_norm_eps, output_);
  }
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const Layer& L = layers_[size_t(l)];
    ctx.layer = l;
    workspace_.Reset();
    L.attention->AddTo(ctx, x, RowNorm{&L.attn_norm, config_.rms_norm_eps, xn}, y);
    workspace_.Reset();
    ctx.residual = &x;
    L.ffn->AddTo(ctx, x, RowNorm{&L.ffn_norm, config_.rms_norm_eps, xn}, y);
    if (!ctx.status.ok()) return ctx.status;  // the step's tokens are not committed
  }
  for (const Segment& s : segments_) s.cache->set_length(s.n_past + s.rows);
  if (expert_cache_) {
    int64_t sticky = 0;
    for (const Layer& L : layers_) sticky += L.moe ? L.moe->sticky_routings() : 0;
    expert_cache_->CountTokens(t, sticky - sticky_reported_);
    sticky_reported_ = sticky;
  }

  Tensor logits = Logits(x, output_norm_, config_.rms_norm_eps, output_);
  Embeddings(x);
  return logits;
}

Status DecoderModel::CheckRecurrentState() {
  for (const Segment& s : segments_) {
    if (s.cache->pool().state_floats() == 0) continue;
    if (s.n_past == 0) {  // a new sequence starts from zero state
      for (size_t l = 0; l < layers_.size(); ++l) {
        if (config_.is_linear(int64_t(l))) backend_.Zero(s.cache->state(int64_t(l)));
      }
      s.cache->set_state_tokens(0);
    } else if (s.cache->state_tokens() != s.n_past) {
      return Status::Error("the recurrent (KDA) state covers " +
                           std::to_string(s.cache->state_tokens()) + " tokens of a sequence of " +
                           std::to_string(s.n_past) +
                           ": truncating or sharing a cache of this model is not supported yet");
    }
  }
  return Status::Ok();
}

void DecoderModel::ForwardHyperConnected(StepContext& ctx, int64_t t) {
  const int64_t n = config_.hc.mult, h = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  const Tensor x = x_.RowSlice(0, t), xn = xn_.RowSlice(0, t), y = y_.RowSlice(0, t),
               streams = streams_.RowSlice(0, t), post = hc_post_.RowSlice(0, t),
               comb = hc_comb_.RowSlice(0, t);
  for (int64_t i = 0; i < n; ++i) backend_.CopyColumns(x, 0, streams, i * h, h);  // expand
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const Layer& L = layers_[size_t(l)];
    ctx.layer = l;
    workspace_.Reset();
    L.attn_hc->Collapse(ctx, streams, x, post, comb);
    backend_.RmsNorm(x, L.attn_norm, eps, xn);
    workspace_.Reset();
    L.attention->Compute(ctx, xn, y);
    L.attn_hc->Expand(ctx, post, comb, y, streams);
    workspace_.Reset();
    L.ffn_hc->Collapse(ctx, streams, x, post, comb);
    backend_.RmsNorm(x, L.ffn_norm, eps, xn);
    workspace_.Reset();
    ctx.residual = &x;
    L.ffn->Compute(ctx, xn, y);
    L.ffn_hc->Expand(ctx, post, comb, y, streams);
    if (!ctx.status.ok()) return;
  }
  backend_.MeanOfStreams(streams, n, x);  // the final collapse
}

StepContext DecoderModel::StartStep(int64_t t) {
  StepContext ctx{backend_, workspace_};
  ctx.t = t;
  ctx.segments = segments_;
  ctx.positions = std::span<const int32_t>(positions_).first(size_t(t));
  ctx.dsa = &dsa_;
  ctx.observer = observer_;
  dsa_.valid = false;
  return ctx;
}

Tensor DecoderModel::Logits(const Tensor& x, const Tensor& norm, float eps, const Tensor& head) {
  // Only the rows whose logits are wanted go through the final norm and head.
  const int64_t rows = int64_t(logit_rows_.size());
  const Tensor picked = y_.RowSlice(0, rows), normed = xn_.RowSlice(0, rows),
               logits = logits_.RowSlice(0, rows);
  backend_.GatherRows(x, logit_rows_, picked);
  hidden_ = picked;
  const RowNorm row_norm{&norm, eps, normed};
  const Projection projection[] = {{&head, nullptr, logits}};
  backend_.FusedMatmul(picked, projection, {.norm = &row_norm});
  return logits;
}

void DecoderModel::Embeddings(const Tensor& x) {
  const int64_t rows = int64_t(embedding_rows_.size());
  embeddings_ = rows > 0 ? normed_.RowSlice(0, rows) : Tensor();
  if (rows == 0) return;
  // xn_ is free again once the head has read its normed rows.
  const Tensor picked = xn_.RowSlice(0, rows);
  backend_.GatherRows(x, embedding_rows_, picked);
  backend_.RmsNorm(picked, output_norm_, config_.rms_norm_eps, embeddings_);
}

Expected<std::unique_ptr<KvCache>> DecoderModel::NewMtpCache(int64_t capacity) {
  if (!mtp_) return Status::Error("the model has no MTP layer loaded (--mtp)");
  RETURN_IF_ERROR(backend_.ReserveForContext(context_shape(capacity, true)));
  const int64_t b = KvPool::kDefaultBlockTokens;
  ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool,
                   KvPool::Create(backend_, (capacity + b - 1) / b, b, {mtp_->cache_spec()},
                                  kv_type_));
  KvPool* p = pool.get();
  auto cache = std::make_unique<KvCache>(p, capacity, std::move(pool));
  RETURN_IF_ERROR(cache->Reserve(capacity));
  return cache;
}

Expected<Tensor> DecoderModel::ForwardMtp(std::span<const SequenceStep> steps,
                                          const Tensor& hidden) {
  if (!mtp_) return Status::Error("the model has no MTP layer loaded (--mtp)");
  int64_t t = 0;
  for (const SequenceStep& s : steps) t += int64_t(s.tokens.size());
  const int64_t h = config_.hidden_size;
  if (hidden.rank != 2 || hidden.dim(0) != t || hidden.dim(1) != h) {
    return Status::Error("MTP step: hidden states must be [" + std::to_string(t) + ", " +
                         std::to_string(h) + "]");
  }
  RETURN_IF_ERROR(PlanStep(steps));
  const ModelConfig& mc = mtp_->config();
  StepContext ctx = StartStep(t);
  ctx.layer = 0;  // the cache holds this one layer

  const Tensor x = x_.RowSlice(0, t), xn = xn_.RowSlice(0, t), y = y_.RowSlice(0, t);
  // hidden may be rows of y_ (last_hidden()): read it before y is written.
  backend_.Copy(hidden, x);
  backend_.RmsNorm(x, mtp_->hnorm(), mc.rms_norm_eps, xn);
  backend_.Embedding(mtp_->embed(), std::span<const int32_t>(step_ids_).first(size_t(t)), y);
  backend_.RmsNorm(y, mtp_->enorm(), mc.rms_norm_eps, y);
  workspace_.Reset();
  const Tensor joined = workspace_.Take(t, 2 * h);  // [enorm(embedding) | hnorm(hidden)]
  backend_.CopyColumns(y, 0, joined, 0, h);
  backend_.CopyColumns(xn, 0, joined, h, h);
  backend_.Matmul(joined, mtp_->eh_proj(), nullptr, x);

  workspace_.Reset();
  mtp_->attention().AddTo(ctx, x, RowNorm{&mtp_->attn_norm(), mc.rms_norm_eps, xn}, y);
  workspace_.Reset();
  ctx.residual = &x;
  mtp_->ffn().AddTo(ctx, x, RowNorm{&mtp_->ffn_norm(), mc.rms_norm_eps, xn}, y);
  if (!ctx.status.ok()) return ctx.status;
  for (const Segment& s : segments_) s.cache->set_length(s.n_past + s.rows);

  return Logits(x, mtp_->head_norm(), mc.rms_norm_eps, mtp_->head());
}

RoutingStats DecoderModel::routing_stats() const {
  RoutingStats s;
  s.experts_per_token = config_.moe.experts_per_token;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].moe == nullptr) continue;
    s.layers.push_back(int64_t(l));
    s.counts.push_back(layers_[l].moe->expert_counts());
  }
  if (expert_cache_) s.cache = expert_cache_->stats();
  return s;
}

void DecoderModel::ResetRoutingStats() {
  for (Layer& L : layers_) {
    if (L.moe) L.moe->ResetCounts();
  }
}

}  // namespace anymoe
