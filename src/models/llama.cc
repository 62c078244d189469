#include "models/llama.h"

#include <cmath>
#include <string>

#include "models/weight_binder.h"

namespace anymoe {
namespace {

// Tensor names of one llama layer in each file format.
struct LlamaNames {
  std::string embd, out_norm, output;
  std::string Layer(int64_t i, const char* what) const { return layer_prefix(i) + what; }
  std::string (*layer_prefix)(int64_t);
  const char *attn_norm, *q, *k, *v, *o, *ffn_norm, *gate, *up, *down;
};

std::string GgufPrefix(int64_t i) { return "blk." + std::to_string(i) + "."; }
std::string HfPrefix(int64_t i) { return "model.layers." + std::to_string(i) + "."; }

const LlamaNames kGgufNames{"token_embd.weight", "output_norm.weight", "output.weight", GgufPrefix,
                            "attn_norm.weight", "attn_q", "attn_k", "attn_v", "attn_output",
                            "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                            "ffn_down.weight"};
const LlamaNames kHfNames{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                          HfPrefix, "input_layernorm.weight", "self_attn.q_proj",
                          "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                          "mlp.up_proj.weight", "mlp.down_proj.weight"};

}  // namespace

Expected<std::unique_ptr<Model>> LlamaModel::Load(const ModelFile& file, ModelConfig config,
                                                  Backend& backend, const LoadOptions& options) {
  std::unique_ptr<LlamaModel> m(new LlamaModel(std::move(config), backend));
  m->max_step_tokens_ = options.max_step_tokens;
  RETURN_IF_ERROR(m->BindWeights(file));
  RETURN_IF_ERROR(m->AllocateActivations());
  return std::unique_ptr<Model>(std::move(m));
}

Status LlamaModel::BindWeights(const ModelFile& file) {
  const ModelConfig& c = config_;
  const LlamaNames& n = file.format == ModelFormat::kGguf ? kGgufNames : kHfNames;
  WeightBinder w(file.tensors(), backend_);
  const int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                kv_dim = c.num_kv_heads * c.head_dim, ffn = c.intermediate_size;
  ASSIGN_OR_RETURN(tok_embd_, w.Require(n.embd, {c.vocab_size, h}));
  ASSIGN_OR_RETURN(output_norm_, w.Require(n.out_norm, {h}));
  if (c.tie_word_embeddings) {
    output_ = tok_embd_;
  } else {
    ASSIGN_OR_RETURN(output_, w.Require(n.output, {c.vocab_size, h}));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Layer L;
    auto weight = [&](const char* base) { return n.Layer(i, base) + ".weight"; };
    auto bias = [&](const char* base) { return n.Layer(i, base) + ".bias"; };
    ASSIGN_OR_RETURN(L.attn_norm, w.Require(n.Layer(i, n.attn_norm), {h}));
    ASSIGN_OR_RETURN(L.wq, w.Require(weight(n.q), {q_dim, h}));
    ASSIGN_OR_RETURN(L.wk, w.Require(weight(n.k), {kv_dim, h}));
    ASSIGN_OR_RETURN(L.wv, w.Require(weight(n.v), {kv_dim, h}));
    ASSIGN_OR_RETURN(L.wo, w.Require(weight(n.o), {h, q_dim}));
    ASSIGN_OR_RETURN(L.bq, w.Optional(bias(n.q), {q_dim}));
    ASSIGN_OR_RETURN(L.bk, w.Optional(bias(n.k), {kv_dim}));
    ASSIGN_OR_RETURN(L.bv, w.Optional(bias(n.v), {kv_dim}));
    ASSIGN_OR_RETURN(L.ffn_norm, w.Require(n.Layer(i, n.ffn_norm), {h}));
    ASSIGN_OR_RETURN(L.w_gate, w.Require(n.Layer(i, n.gate), {ffn, h}));
    ASSIGN_OR_RETURN(L.w_up, w.Require(n.Layer(i, n.up), {ffn, h}));
    ASSIGN_OR_RETURN(L.w_down, w.Require(n.Layer(i, n.down), {h, ffn}));
    layers_.push_back(L);
  }
  weight_bytes_ = w.bound_bytes();

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
  return Status::Ok();
}

Status LlamaModel::AllocateActivations() {
  const ModelConfig& c = config_;
  const int64_t t = max_step_tokens_;
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  struct Slot {
    Tensor* tensor;
    int64_t cols;
  };
  const Slot slots[] = {{&act_.x, c.hidden_size},      {&act_.xn, c.hidden_size},
                        {&act_.q, q_dim},              {&act_.k, kv_dim},
                        {&act_.v, kv_dim},             {&act_.attn, q_dim},
                        {&act_.gate, c.intermediate_size}, {&act_.up, c.intermediate_size},
                        {&act_.logits, c.vocab_size}};
  uint64_t total = 0;
  for (const Slot& s : slots) total += (uint64_t(t * s.cols) * 4 + 63) / 64 * 64;
  ASSIGN_OR_RETURN(act_buffer_, backend_.Allocate(total, "activations"));
  uint64_t offset = 0;
  for (const Slot& s : slots) {
    *s.tensor = Tensor::Of(act_buffer_->base(), DType::kF32, {t, s.cols});
    s.tensor->offset = offset;
    offset += (uint64_t(t * s.cols) * 4 + 63) / 64 * 64;
  }
  activation_bytes_ = total;
  positions_.resize(size_t(t));
  return Status::Ok();
}

Expected<std::unique_ptr<KvCache>> LlamaModel::NewCache(int64_t capacity) {
  return KvCache::Create(backend_, config_.num_layers, capacity, config_.num_kv_heads,
                         config_.head_dim, config_.head_dim);
}

void LlamaModel::AttentionBlock(const Layer& L, int64_t l, int64_t t, KvCache& cache) {
  const ModelConfig& c = config_;
  const int64_t n_past = cache.length();
  const std::span<const int32_t> pos(positions_.data(), size_t(t));
  Tensor xn = act_.xn.RowSlice(0, t);
  Tensor q = act_.q.RowSlice(0, t), k = act_.k.RowSlice(0, t), v = act_.v.RowSlice(0, t);
  backend_.RmsNorm(act_.x.RowSlice(0, t), L.attn_norm, c.rms_norm_eps, xn);
  backend_.Matmul(xn, L.wq, L.bq ? &*L.bq : nullptr, q);
  backend_.Matmul(xn, L.wk, L.bk ? &*L.bk : nullptr, k);
  backend_.Matmul(xn, L.wv, L.bv ? &*L.bv : nullptr, v);
  backend_.Rope(q.Reshaped({t, c.num_heads, c.head_dim}), pos, rope_);
  backend_.Rope(k.Reshaped({t, c.num_kv_heads, c.head_dim}), pos, rope_);
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  Tensor k_cache = cache.k(l), v_cache = cache.v(l);
  backend_.Copy(k, k_cache.Reshaped({cache.capacity(), kv_dim}).RowSlice(n_past, t));
  backend_.Copy(v, v_cache.Reshaped({cache.capacity(), kv_dim}).RowSlice(n_past, t));
  Tensor attn = act_.attn.RowSlice(0, t);
  backend_.Attention(q.Reshaped({t, c.num_heads, c.head_dim}), k_cache, v_cache, n_past,
                     1.0f / std::sqrt(float(c.head_dim)),
                     attn.Reshaped({t, c.num_heads, c.head_dim}));
  backend_.Matmul(attn, L.wo, nullptr, xn);
  backend_.Add(act_.x.RowSlice(0, t), xn, act_.x.RowSlice(0, t));
}

void LlamaModel::FeedForwardBlock(const Layer& L, int64_t t) {
  Tensor x = act_.x.RowSlice(0, t), xn = act_.xn.RowSlice(0, t);
  Tensor gate = act_.gate.RowSlice(0, t), up = act_.up.RowSlice(0, t);
  backend_.RmsNorm(x, L.ffn_norm, config_.rms_norm_eps, xn);
  backend_.Matmul(xn, L.w_gate, nullptr, gate);
  backend_.Matmul(xn, L.w_up, nullptr, up);
  backend_.SwiGlu(gate, up, gate);
  backend_.Matmul(gate, L.w_down, nullptr, xn);
  backend_.Add(x, xn, x);
}

Expected<Tensor> LlamaModel::Forward(std::span<const int32_t> tokens, KvCache& cache,
                                     bool all_logits) {
  const int64_t t = int64_t(tokens.size());
  if (t == 0 || t > max_step_tokens_) {
    return Status::Error("forward step of " + std::to_string(t) + " tokens (allowed 1.." +
                         std::to_string(max_step_tokens_) + ")");
  }
  if (cache.length() + t > cache.capacity()) {
    return Status::Error("context full: " + std::to_string(cache.length()) + " + " +
                         std::to_string(t) + " tokens exceed the KV cache of " +
                         std::to_string(cache.capacity()));
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= config_.vocab_size) {
      return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(config_.vocab_size) + ")");
    }
  }
  for (int64_t i = 0; i < t; ++i) positions_[size_t(i)] = int32_t(cache.length() + i);

  backend_.Embedding(tok_embd_, tokens, act_.x.RowSlice(0, t));
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    AttentionBlock(layers_[size_t(l)], l, t, cache);
    FeedForwardBlock(layers_[size_t(l)], t);
  }
  cache.set_length(cache.length() + t);

  const int64_t first = all_logits ? 0 : t - 1, rows = t - first;
  Tensor xn = act_.xn.RowSlice(0, rows);
  backend_.RmsNorm(act_.x.RowSlice(first, rows), output_norm_, config_.rms_norm_eps, xn);
  Tensor logits = act_.logits.RowSlice(0, rows);
  backend_.Matmul(xn, output_, nullptr, logits);
  return logits;
}

}  // namespace anymoe
