#include "models/model_stats.h"

namespace anymoe {
namespace {

int64_t AttentionParameters(const ModelConfig& c, int64_t layer) {
  const int64_t h = c.hidden_size, n_h = c.num_heads;
  if (c.is_linear(layer)) {  // KDA: q/k/v, conv, forget and output gates, beta, o_norm, o
    const KdaConfig& k = c.kda;
    const int64_t d = k.head_dim, D = k.num_heads * d;
    return 3 * D * h + 3 * D * k.conv_kernel + (d * h + D * d + D + k.num_heads) +
           k.num_heads * h + (d * h + D * d) + d + h * D;
  }
  if (c.attention == AttentionKind::kGqa) {
    const int64_t q = n_h * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    int64_t p = h * (q + 2 * kv) + q * h;
    if (c.attention_bias) p += q + 2 * kv;
    if (c.qk_norm) p += 2 * c.head_dim;
    return p;
  }
  const MlaConfig& m = c.mla;
  const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  int64_t p = m.q_lora_rank > 0 ? m.q_lora_rank * h + m.q_lora_rank + n_h * qk * m.q_lora_rank
                                : n_h * qk * h;
  p += (m.kv_lora_rank + m.qk_rope_head_dim) * h + m.kv_lora_rank;
  p += n_h * (m.qk_nope_head_dim + m.v_head_dim) * m.kv_lora_rank;
  p += h * n_h * m.v_head_dim;
  if (c.dsa.topk > 0 && c.indexer_kinds[size_t(layer)] == IndexerKind::kFull) {
    const DsaConfig& d = c.dsa;
    p += d.n_heads * d.head_dim * m.q_lora_rank + d.head_dim * h + 2 * d.head_dim + d.n_heads * h;
    if (c.kpool.pool > 0) p += c.kpool.pool * d.head_dim + d.head_dim * h;  // ape, gate
  }
  return p;
}

}  // namespace

ParameterCounts CountParameters(const ModelConfig& c) {
  ParameterCounts p;
  const int64_t h = c.hidden_size;
  // The head multiplies every token by all of its rows; the embedding table is only
  // read one row per token, unless it doubles as the (tied) head.
  const int64_t embedding = c.tie_word_embeddings ? 0 : c.vocab_size * h;
  int64_t always = h + c.vocab_size * h;  // final norm, head
  for (int64_t l = 0; l < c.num_layers; ++l) {
    always += 2 * h + AttentionParameters(c, l);
    if (c.hc.mult > 1) {  // two mHC hyper-connections: fn, base, scale
      const int64_t n = c.hc.mult, m = (2 + n) * n;
      always += 2 * (m * n * h + m + 3);
    }
    if (c.ffn_kinds[size_t(l)] == FfnKind::kDense) {
      always += 3 * h * c.intermediate_size;
      continue;
    }
    const MoeConfig& m = c.moe;
    always += m.num_experts * h + (m.selection_bias ? m.num_experts : 0) + 3 * h * m.shared_ffn;
    const int64_t expert = 3 * h * m.expert_ffn;
    p.routed_experts += m.num_experts * expert;
    p.active += m.experts_per_token * expert;
  }
  p.total = embedding + always + p.routed_experts;
  p.active += always;
  return p;
}

int64_t CountTensorElements(const TensorSource& tensors) {
  int64_t n = 0;
  for (const TensorInfo& t : tensors.tensors()) n += t.elements();
  return n;
}

std::map<std::string, DTypeUsage> SummarizeDTypes(const TensorSource& tensors) {
  std::map<std::string, DTypeUsage> out;
  for (const TensorInfo& t : tensors.tensors()) {
    DTypeUsage& u = out[std::string(Name(t.dtype))];
    ++u.tensors;
    u.elements += t.elements();
    u.bytes += t.bytes;
  }
  return out;
}

KvFootprint KvValuesPerToken(const ModelConfig& c) {
  KvFootprint f;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.is_linear(l)) {
      f.state_values_per_sequence += c.kda.state_floats();
      continue;
    }
    if (c.attention == AttentionKind::kGqa) {
      f.values_per_token += 2 * c.num_kv_heads * c.head_dim;
      f.full_kv_values_per_token += 2 * c.num_kv_heads * c.head_dim;
      continue;
    }
    const MlaConfig& m = c.mla;
    f.values_per_token += m.kv_lora_rank + m.qk_rope_head_dim;
    if (c.dsa.topk > 0 && c.indexer_kinds[size_t(l)] == IndexerKind::kFull) {
      // KPool keeps each token's key and pooling gate score.
      f.values_per_token += c.kpool.pool > 0 ? 2 * c.dsa.head_dim : c.dsa.head_dim;
    }
    f.full_kv_values_per_token +=
        c.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
  }
  return f;
}

int64_t AttentionMacsPerKey(const ModelConfig& c) {
  int64_t macs = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.attention == AttentionKind::kGqa) {
      macs += 2 * c.num_heads * c.head_dim;
    } else if (c.dsa.topk > 0) {
      if (c.indexer_kinds[size_t(l)] == IndexerKind::kFull) macs += c.dsa.n_heads * c.dsa.head_dim;
    } else {
      macs += c.num_heads * (2 * c.mla.kv_lora_rank + c.mla.qk_rope_head_dim);
    }
  }
  return macs;
}

}  // namespace anymoe
