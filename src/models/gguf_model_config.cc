// ModelConfig from GGUF metadata as llama.cpp's converter writes it
// (`<arch>.*` keys): llama (incl. Mixtral's experts), glm4moe, qwen3moe,
// deepseek2 (DeepSeek-V3, GLM-4.7-Flash, Kimi K2.5's text model), glm-dsa (GLM-5)
// and deepseek32 (DeepSeek-V3.2); and glm5-next (GLM-5.3-Flash), which llama.cpp
// lacks, as tools/gen_glm5_next_gguf.py writes it. Every number is
// range-checked as it is read (IntKey, RealKey), naming the key, and the layer
// count before any per-layer table is sized from it.
#include <cmath>

#include "formats/gguf.h"
#include "models/config_loader.h"
#include "models/config_validation.h"
#include "models/supported_architectures.h"

namespace anymoe {
namespace {

using B = ConfigBounds;

// An integer key in [lo, hi]; absent: `fallback`, or an error when required.
Expected<int64_t> IntKey(const GgufFile& f, const std::string& key, std::optional<int64_t> fallback,
                         int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(std::optional<int64_t> v, f.FindI64(key));
  if (!v) {
    if (fallback) return *fallback;
    return Status::Error(f.path() + ": metadata key '" + key + "' is missing");
  }
  if (*v < lo || *v > hi) {
    return Status::Error(f.path() + ": metadata key '" + key + "' = " + std::to_string(*v) +
                         " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "]");
  }
  return *v;
}

// A finite f32/f64 key in [lo, hi]; absent: `fallback`, or an error when required.
Expected<float> RealKey(const GgufFile& f, const std::string& key, std::optional<float> fallback,
                        double lo, double hi) {
  ASSIGN_OR_RETURN(std::optional<float> v, f.FindF32(key));
  if (!v) {
    if (fallback) return *fallback;
    return Status::Error(f.path() + ": metadata key '" + key + "' is missing");
  }
  if (!std::isfinite(*v) || *v < lo || *v > hi) {
    char range[64];
    std::snprintf(range, sizeof(range), "[%g, %g]", lo, hi);
    return Status::Error(f.path() + ": metadata key '" + key + "' = " + std::to_string(*v) +
                         " is out of range " + range);
  }
  return *v;
}

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values.
constexpr uint32_t kGatingSoftmax = 1;
constexpr uint32_t kGatingSigmoid = 2;

Status ReadRope(const GgufFile& f, const std::string& p, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.rope_theta, RealKey(f, p + "rope.freq_base", 10000.0f, 1e-6, 1e12));
  ASSIGN_OR_RETURN(auto type, f.FindString(p + "rope.scaling.type"));
  ASSIGN_OR_RETURN(c.rope_scaling.type, RopeTypeFromName(type.value_or(""), f.path()));
  RopeScaling& s = c.rope_scaling;
  // Positive factors only: a negative one would mirror the rotation (issue 20).
  ASSIGN_OR_RETURN(s.factor, RealKey(f, p + "rope.scaling.factor", 1.0f, 1e-6, B::kMaxFactor));
  ASSIGN_OR_RETURN(const int64_t orig, IntKey(f, p + "rope.scaling.original_context_length",
                                              c.max_position_embeddings, 1, B::kPositions));
  s.original_max_position = double(orig);
  ASSIGN_OR_RETURN(s.beta_fast,
                   RealKey(f, p + "rope.scaling.yarn_beta_fast", 32.0f, 0, B::kMaxFactor));
  ASSIGN_OR_RETURN(s.beta_slow,
                   RealKey(f, p + "rope.scaling.yarn_beta_slow", 1.0f, 0, B::kMaxFactor));
  // DeepSeek YaRN: the converter stores 0.1 * mscale_all_dim and drops mscale,
  // which is 1.0 in every released DeepSeek config.
  if (f.FindValue(p + "rope.scaling.yarn_log_multiplier") != nullptr) {
    ASSIGN_OR_RETURN(const float log_mul,
                     RealKey(f, p + "rope.scaling.yarn_log_multiplier", std::nullopt, 0, 1e5));
    s.mscale_all_dim = double(log_mul) / 0.1;
    s.mscale = 1.0;
  }
  return Status::Ok();
}

Status ReadMoe(const GgufFile& f, const std::string& p, ModelConfig& c) {
  ASSIGN_OR_RETURN(const int64_t experts, IntKey(f, p + "expert_count", 0, 0, B::kExperts));
  if (experts == 0) return Status::Ok();
  MoeConfig& m = c.moe;
  m.num_experts = experts;
  ASSIGN_OR_RETURN(m.experts_per_token,
                   IntKey(f, p + "expert_used_count", std::nullopt, 1, experts));
  // Mixtral: feed_forward_length.
  ASSIGN_OR_RETURN(m.expert_ffn,
                   IntKey(f, p + "expert_feed_forward_length", c.intermediate_size, 1, B::kFfn));
  ASSIGN_OR_RETURN(const int64_t shared, IntKey(f, p + "expert_shared_count", 0, 0, 64));
  m.shared_ffn = shared * m.expert_ffn;
  ASSIGN_OR_RETURN(const int64_t groups, IntKey(f, p + "expert_group_count", 1, 0, experts));
  m.n_group = std::max<int64_t>(1, groups);
  ASSIGN_OR_RETURN(const int64_t groups_used,
                   IntKey(f, p + "expert_group_used_count", 1, 0, experts));
  m.topk_group = std::max<int64_t>(1, groups_used);
  ASSIGN_OR_RETURN(auto norm, f.FindBool(p + "expert_weights_norm"));
  ASSIGN_OR_RETURN(m.routed_scaling_factor,
                   RealKey(f, p + "expert_weights_scale", 1.0f, 1e-6, B::kMaxFactor));
  m.selection_bias = f.Find("blk." + std::to_string(c.num_layers - 1) + ".exp_probs_b.bias");
  ASSIGN_OR_RETURN(auto gating, f.FindU32(p + "expert_gating_func"));
  // Without the key a selection bias means DeepSeek-V3-style sigmoid routing (the
  // converter omits it for deepseek2 files made from transformers 5 configs).
  const uint32_t func = gating.value_or(m.selection_bias ? kGatingSigmoid : kGatingSoftmax);
  if (func != kGatingSoftmax && func != kGatingSigmoid) {
    return Status::Error(f.path() + ": unsupported expert_gating_func " + std::to_string(func));
  }
  m.scoring = func == kGatingSigmoid ? MoeConfig::Scoring::kSigmoid : MoeConfig::Scoring::kSoftmax;
  // Mixtral (llama) always renormalises; the others say so in expert_weights_norm.
  m.norm_topk_prob = norm.value_or(c.arch == "mixtral");
  ASSIGN_OR_RETURN(const int64_t dense,
                   IntKey(f, p + "leading_dense_block_count", 0, 0, c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.ffn_kinds[size_t(i)] = i < dense ? FfnKind::kDense : FfnKind::kMoe;
  }
  return Status::Ok();
}

Status ReadMla(const GgufFile& f, const std::string& p, ModelConfig& c) {
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  ASSIGN_OR_RETURN(m.q_lora_rank, IntKey(f, p + "attention.q_lora_rank", 0, 0, B::kRank));
  ASSIGN_OR_RETURN(m.kv_lora_rank,
                   IntKey(f, p + "attention.kv_lora_rank", std::nullopt, 1, B::kRank));
  ASSIGN_OR_RETURN(m.qk_rope_head_dim,
                   IntKey(f, p + "rope.dimension_count", std::nullopt, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(const int64_t qk, IntKey(f, p + "attention.key_length_mla", std::nullopt,
                                            m.qk_rope_head_dim + 1, B::kHeadDim));
  ASSIGN_OR_RETURN(m.v_head_dim,
                   IntKey(f, p + "attention.value_length_mla", std::nullopt, 1, B::kHeadDim));
  m.qk_nope_head_dim = qk - m.qk_rope_head_dim;
  c.head_dim = qk;
  c.num_kv_heads = c.num_heads;  // the file's head_count_kv = 1 is the MQA view of the latent
  c.rotary_dims = m.qk_rope_head_dim;
  c.rope_pairing = RopePairing::kInterleaved;
  return Status::Ok();
}

// The lightning indexer's shape, common to every DSA variant (glm-dsa,
// deepseek32, glm5-next's KPool indexer).
Status ReadIndexerShape(const GgufFile& f, const std::string& p, DsaConfig& d) {
  ASSIGN_OR_RETURN(d.n_heads,
                   IntKey(f, p + "attention.indexer.head_count", std::nullopt, 1, B::kHeads));
  ASSIGN_OR_RETURN(d.head_dim,
                   IntKey(f, p + "attention.indexer.key_length", std::nullopt, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(d.topk,
                   IntKey(f, p + "attention.indexer.top_k", std::nullopt, 1, B::kPositions));
  return Status::Ok();
}

Status ReadDsa(const GgufFile& f, const std::string& p, ModelConfig& c) {
  DsaConfig& d = c.dsa;
  RETURN_IF_ERROR(ReadIndexerShape(f, p, d));
  // llama.cpp's deepseek32 graph ropes the indexer with LLAMA_ROPE_TYPE_NEOX
  // (half-split, as DeepseekV32Indexer) and glm-dsa's with NORM (interleaved);
  // deepseek32 has no indexer.types: every layer runs its indexer.
  d.pairing = c.arch == "deepseek32" ? RopePairing::kHalfSplit : RopePairing::kInterleaved;
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  const GgufValue* types = f.FindValue(p + "attention.indexer.types");
  if (types != nullptr && c.arch != "deepseek32") {
    // One entry per trunk layer, or per block with the NextN layers too.
    const uint64_t n = types->is_array() ? types->array_size() : 0;
    if (n != uint64_t(c.num_layers) && n != uint64_t(c.num_layers + c.num_nextn_layers)) {
      return Status::Error(f.path() + ": " + p + "attention.indexer.types must list " +
                           std::to_string(c.num_layers) + " layers");
    }
    for (uint64_t i = 0; i < uint64_t(c.num_layers); ++i) {
      const bool full = types->BoolAt(i).value_or(types->IntAt(i).value_or(1) != 0);
      c.indexer_kinds[i] = full ? IndexerKind::kFull : IndexerKind::kShared;
    }
  }
  return Status::Ok();
}

// A bool array key with one entry per trunk layer; absent: nullopt.
Expected<std::optional<std::vector<bool>>> LayerFlags(const GgufFile& f, const std::string& key,
                                                      int64_t layers) {
  const GgufValue* v = f.FindValue(key);
  if (v == nullptr) return std::optional<std::vector<bool>>();
  if (!v->is_array() || v->array_size() != uint64_t(layers)) {
    return Status::Error(f.path() + ": metadata key '" + key + "' must list " +
                         std::to_string(layers) + " layers");
  }
  std::vector<bool> flags(static_cast<size_t>(layers), false);
  for (uint64_t i = 0; i < uint64_t(layers); ++i) {
    const std::optional<bool> flag = v->BoolAt(i);
    if (!flag) {
      return Status::Error(f.path() + ": metadata key '" + key + "' entry " + std::to_string(i) +
                           " is not a bool");
    }
    flags[size_t(i)] = *flag;
  }
  return std::optional<std::vector<bool>>(std::move(flags));
}

// GLM-5.3-Flash as tools/gen_glm5_next_gguf.py writes it (`glm5-next`; the key
// names are listed in docs/models.md): KDA layers, NoPE MLA with the KPool DSA
// indexer, mHC streams, SwiGLU clamp. The MoE was read by ReadMoe.
Status ReadGlm5Next(const GgufFile& f, const std::string& p, ModelConfig& c) {
  c.arch = "glm5_next";  // the HF model type: the model code keys NoPE on it
  if (f.FindValue(p + "rope.dimension_count") != nullptr) {
    return Status::Error(f.path() + ": " + p + "rope.dimension_count is set, but glm5-next's " +
                         "attention has no rotary part (NoPE)");
  }
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  ASSIGN_OR_RETURN(m.q_lora_rank,
                   IntKey(f, p + "attention.q_lora_rank", std::nullopt, 1, B::kRank));
  ASSIGN_OR_RETURN(m.kv_lora_rank,
                   IntKey(f, p + "attention.kv_lora_rank", std::nullopt, 1, B::kRank));
  ASSIGN_OR_RETURN(m.qk_nope_head_dim,
                   IntKey(f, p + "attention.key_length_mla", std::nullopt, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(m.v_head_dim,
                   IntKey(f, p + "attention.value_length_mla", std::nullopt, 1, B::kHeadDim));
  m.qk_rope_head_dim = 0;
  m.latent_norm_eps = c.rms_norm_eps;
  c.head_dim = m.qk_nope_head_dim;
  c.num_kv_heads = c.num_heads;  // head_count_kv = 1 is the MQA view of the latent
  c.rotary_dims = 0;
  DsaConfig& d = c.dsa;
  RETURN_IF_ERROR(ReadIndexerShape(f, p, d));
  ASSIGN_OR_RETURN(c.kpool.pool, IntKey(f, p + "attention.indexer.kpool", std::nullopt, 1, 4096));
  ASSIGN_OR_RETURN(auto tail, f.FindBool(p + "attention.indexer.kpool_select_tail"));
  c.kpool.select_tail = tail.value_or(true);
  if (d.topk % c.kpool.pool != 0) {
    return Status::Error(f.path() + ": " + p + "attention.indexer.top_k " + std::to_string(d.topk) +
                         " is not a multiple of " + p + "attention.indexer.kpool " +
                         std::to_string(c.kpool.pool));
  }
  ASSIGN_OR_RETURN(auto full, LayerFlags(f, p + "attention.indexer.types", c.num_layers));
  ASSIGN_OR_RETURN(auto kda, LayerFlags(f, p + "kda.layers", c.num_layers));
  if (!kda) return Status::Error(f.path() + ": metadata key '" + p + "kda.layers' is missing");
  c.mixer_kinds.assign(size_t(c.num_layers), MixerKind::kLinear);
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  for (size_t i = 0; i < size_t(c.num_layers); ++i) {
    const bool linear = (*kda)[i];
    c.mixer_kinds[i] = linear ? MixerKind::kLinear : MixerKind::kAttention;
    c.indexer_kinds[i] = linear                ? IndexerKind::kNone
                         : !full || (*full)[i] ? IndexerKind::kFull
                                               : IndexerKind::kShared;
  }
  KdaConfig& k = c.kda;
  ASSIGN_OR_RETURN(k.num_heads, IntKey(f, p + "kda.head_count", std::nullopt, 1, B::kHeads));
  ASSIGN_OR_RETURN(k.head_dim, IntKey(f, p + "kda.head_dim", std::nullopt, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(k.conv_kernel, IntKey(f, p + "ssm.conv_kernel", std::nullopt, 1, 64));
  // Absent: the unbounded gate (the HF config's linear_lower_bound null).
  k.bounded_gate = f.FindValue(p + "kda.lower_bound") != nullptr;
  ASSIGN_OR_RETURN(k.lower_bound, RealKey(f, p + "kda.lower_bound", -5.0f, -1e6, 0));
  HyperConnectionConfig& hc = c.hc;
  ASSIGN_OR_RETURN(hc.mult, IntKey(f, p + "hc.mult", std::nullopt, 1, 64));
  ASSIGN_OR_RETURN(hc.sinkhorn_iters, IntKey(f, p + "hc.sinkhorn_iters", std::nullopt, 1, 1000));
  ASSIGN_OR_RETURN(hc.eps, RealKey(f, p + "hc.eps", std::nullopt, 0, 1));
  ASSIGN_OR_RETURN(c.swiglu_limit, RealKey(f, p + "swiglu_limit", std::nullopt, 0, 1e30));
  return Status::Ok();
}

}  // namespace

Expected<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(const std::string arch, f.GetString("general.architecture"));
  const std::string p = arch + ".";
  const bool dsa = arch == "glm-dsa" || arch == "deepseek32";
  const bool glm5_next = arch == "glm5-next";
  if (arch != "llama" && arch != "glm4moe" && arch != "qwen3moe" && arch != "deepseek2" && !dsa &&
      !glm5_next) {
    return Status::Error(
        f.path() + ": architecture '" + arch +
        "' is not supported from GGUF (supported: " + SupportedGgufArchitectures() + ")");
  }
  ASSIGN_OR_RETURN(auto experts, f.FindI64(p + "expert_count"));
  c.arch = arch == "llama" && experts.value_or(0) > 0 ? "mixtral" : arch;
  ASSIGN_OR_RETURN(c.hidden_size, IntKey(f, p + "embedding_length", std::nullopt, 1, B::kHidden));
  ASSIGN_OR_RETURN(const int64_t blocks, IntKey(f, p + "block_count", std::nullopt, 1, B::kLayers));
  // llama.cpp counts the NextN/MTP blocks in block_count (GLM-5: 78 + 1 = 79).
  ASSIGN_OR_RETURN(c.num_nextn_layers,
                   IntKey(f, p + "nextn_predict_layers", int64_t{0}, 0, B::kLayers));
  if (c.num_nextn_layers >= blocks) {
    return Status::Error(f.path() + ": " + p + "nextn_predict_layers " +
                         std::to_string(c.num_nextn_layers) + " leaves no trunk of the " +
                         std::to_string(blocks) + " blocks");
  }
  c.num_layers = blocks - c.num_nextn_layers;
  ASSIGN_OR_RETURN(c.intermediate_size,
                   IntKey(f, p + "feed_forward_length", std::nullopt, 0, B::kFfn));
  ASSIGN_OR_RETURN(c.num_heads, IntKey(f, p + "attention.head_count", std::nullopt, 1, B::kHeads));
  ASSIGN_OR_RETURN(c.num_kv_heads,
                   IntKey(f, p + "attention.head_count_kv", c.num_heads, 1, B::kHeads));
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   IntKey(f, p + "context_length", std::nullopt, 1, B::kPositions));
  ASSIGN_OR_RETURN(c.rms_norm_eps,
                   RealKey(f, p + "attention.layer_norm_rms_epsilon", std::nullopt, 0, 1));
  ASSIGN_OR_RETURN(c.head_dim, IntKey(f, p + "attention.key_length", c.hidden_size / c.num_heads, 1,
                                      B::kHeadDim));
  ASSIGN_OR_RETURN(c.rotary_dims,
                   IntKey(f, p + "rope.dimension_count", c.head_dim, 1, B::kHeadDim));
  // llama.cpp permutes Q/K rows of `llama` files into adjacent (interleaved)
  // pairs; glm4moe and qwen3moe keep HF's layout and use NeoX (half-split) RoPE.
  c.rope_pairing = arch == "llama" ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  RETURN_IF_ERROR(ReadRope(f, p, c));
  // llama.cpp's LLAMA_POOLING_TYPE: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
  // None and rank (a reranker's head, which we do not run) pool by the mean.
  ASSIGN_OR_RETURN(const int64_t pooling, IntKey(f, p + "pooling_type", 1, 0, 4));
  c.pooling = pooling == 2   ? EmbeddingPooling::kCls
              : pooling == 3 ? EmbeddingPooling::kLast
                             : EmbeddingPooling::kMean;

  ASSIGN_OR_RETURN(auto vocab, f.FindI64(p + "vocab_size"));
  if (vocab) {
    ASSIGN_OR_RETURN(c.vocab_size, IntKey(f, p + "vocab_size", std::nullopt, 1, B::kVocab));
  } else if (const TensorInfo* emb = f.Find("token_embd.weight")) {
    c.vocab_size = emb->shape[0];
  }
  c.tie_word_embeddings = f.Find("output.weight") == nullptr;
  c.attention_bias = f.Find("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.Find("blk.0.attn_q_norm.weight") != nullptr;
  // num_layers is within ConfigBounds::kLayers: the per-layer tables are small.
  c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kDense);
  RETURN_IF_ERROR(ReadMoe(f, p, c));
  if (arch == "deepseek2" || dsa) RETURN_IF_ERROR(ReadMla(f, p, c));
  if (dsa) RETURN_IF_ERROR(ReadDsa(f, p, c));
  if (glm5_next) RETURN_IF_ERROR(ReadGlm5Next(f, p, c));
  RETURN_IF_ERROR(ValidateConfig(c, f.path()));
  return c;
}

}  // namespace anymoe
