// ModelConfig from GGUF metadata as llama.cpp's converter writes it
// (`<arch>.*` keys): llama (incl. Mixtral's experts), glm4moe, qwen3moe,
// deepseek2 (DeepSeek-V3, GLM-4.7-Flash) and glm-dsa (GLM-5).
#include "formats/gguf.h"
#include "models/config_loader.h"
#include "models/config_validation.h"

namespace anymoe {
namespace {

// llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE values.
constexpr uint32_t kGatingSoftmax = 1;
constexpr uint32_t kGatingSigmoid = 2;

Status ReadRope(const GgufFile& f, const std::string& p, ModelConfig& c) {
  ASSIGN_OR_RETURN(auto theta, f.FindF32(p + "rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0f);
  ASSIGN_OR_RETURN(auto type, f.FindString(p + "rope.scaling.type"));
  ASSIGN_OR_RETURN(c.rope_scaling.type, RopeTypeFromName(type.value_or(""), f.path()));
  RopeScaling& s = c.rope_scaling;
  ASSIGN_OR_RETURN(auto factor, f.FindF32(p + "rope.scaling.factor"));
  s.factor = factor.value_or(1.0f);
  ASSIGN_OR_RETURN(auto orig, f.FindI64(p + "rope.scaling.original_context_length"));
  s.original_max_position = double(orig.value_or(c.max_position_embeddings));
  ASSIGN_OR_RETURN(auto beta_fast, f.FindF32(p + "rope.scaling.yarn_beta_fast"));
  s.beta_fast = beta_fast.value_or(32.0f);
  ASSIGN_OR_RETURN(auto beta_slow, f.FindF32(p + "rope.scaling.yarn_beta_slow"));
  s.beta_slow = beta_slow.value_or(1.0f);
  // DeepSeek YaRN: the converter stores 0.1 * mscale_all_dim and drops mscale,
  // which is 1.0 in every released DeepSeek config.
  ASSIGN_OR_RETURN(auto log_mul, f.FindF32(p + "rope.scaling.yarn_log_multiplier"));
  if (log_mul) {
    s.mscale_all_dim = double(*log_mul) / 0.1;
    s.mscale = 1.0;
  }
  return Status::Ok();
}

Status ReadMoe(const GgufFile& f, const std::string& p, ModelConfig& c) {
  ASSIGN_OR_RETURN(auto experts, f.FindI64(p + "expert_count"));
  if (!experts || *experts == 0) return Status::Ok();
  MoeConfig& m = c.moe;
  m.num_experts = *experts;
  ASSIGN_OR_RETURN(m.experts_per_token, f.GetI64(p + "expert_used_count"));
  ASSIGN_OR_RETURN(auto ffn, f.FindI64(p + "expert_feed_forward_length"));
  m.expert_ffn = ffn.value_or(c.intermediate_size);  // Mixtral: feed_forward_length
  ASSIGN_OR_RETURN(auto shared, f.FindI64(p + "expert_shared_count"));
  m.shared_ffn = shared.value_or(0) * m.expert_ffn;
  ASSIGN_OR_RETURN(auto groups, f.FindI64(p + "expert_group_count"));
  m.n_group = std::max<int64_t>(1, groups.value_or(1));
  ASSIGN_OR_RETURN(auto groups_used, f.FindI64(p + "expert_group_used_count"));
  m.topk_group = std::max<int64_t>(1, groups_used.value_or(1));
  ASSIGN_OR_RETURN(auto norm, f.FindBool(p + "expert_weights_norm"));
  ASSIGN_OR_RETURN(auto scale, f.FindF32(p + "expert_weights_scale"));
  m.routed_scaling_factor = scale.value_or(1.0f);
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
  ASSIGN_OR_RETURN(auto dense, f.FindI64(p + "leading_dense_block_count"));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.ffn_kinds[size_t(i)] = i < dense.value_or(0) ? FfnKind::kDense : FfnKind::kMoe;
  }
  return Status::Ok();
}

Status ReadMla(const GgufFile& f, const std::string& p, ModelConfig& c) {
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  ASSIGN_OR_RETURN(auto q_lora, f.FindI64(p + "attention.q_lora_rank"));
  m.q_lora_rank = q_lora.value_or(0);
  ASSIGN_OR_RETURN(m.kv_lora_rank, f.GetI64(p + "attention.kv_lora_rank"));
  ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.GetI64(p + "rope.dimension_count"));
  ASSIGN_OR_RETURN(const int64_t qk, f.GetI64(p + "attention.key_length_mla"));
  ASSIGN_OR_RETURN(m.v_head_dim, f.GetI64(p + "attention.value_length_mla"));
  m.qk_nope_head_dim = qk - m.qk_rope_head_dim;
  c.head_dim = qk;
  c.num_kv_heads = c.num_heads;  // the file's head_count_kv = 1 is the MQA view of the latent
  c.rotary_dims = m.qk_rope_head_dim;
  c.rope_pairing = RopePairing::kInterleaved;
  return Status::Ok();
}

Status ReadDsa(const GgufFile& f, const std::string& p, ModelConfig& c) {
  DsaConfig& d = c.dsa;
  ASSIGN_OR_RETURN(d.n_heads, f.GetI64(p + "attention.indexer.head_count"));
  ASSIGN_OR_RETURN(d.head_dim, f.GetI64(p + "attention.indexer.key_length"));
  ASSIGN_OR_RETURN(d.topk, f.GetI64(p + "attention.indexer.top_k"));
  d.pairing = RopePairing::kInterleaved;
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  if (const GgufValue* types = f.FindValue(p + "attention.indexer.types")) {
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

}  // namespace

Expected<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(const std::string arch, f.GetString("general.architecture"));
  const std::string p = arch + ".";
  if (arch != "llama" && arch != "glm4moe" && arch != "qwen3moe" && arch != "deepseek2" &&
      arch != "glm-dsa") {
    return Status::Error(f.path() + ": architecture '" + arch +
                         "' is not supported from GGUF (supported: llama, glm4moe, qwen3moe, "
                         "deepseek2, glm-dsa)");
  }
  ASSIGN_OR_RETURN(auto experts, f.FindI64(p + "expert_count"));
  c.arch = arch == "llama" && experts.value_or(0) > 0 ? "mixtral" : arch;
  ASSIGN_OR_RETURN(c.hidden_size, f.GetI64(p + "embedding_length"));
  ASSIGN_OR_RETURN(const int64_t blocks, f.GetI64(p + "block_count"));
  // llama.cpp counts the NextN/MTP blocks in block_count (GLM-5: 78 + 1 = 79).
  ASSIGN_OR_RETURN(auto nextn, f.FindI64(p + "nextn_predict_layers"));
  c.num_nextn_layers = nextn.value_or(0);
  if (c.num_nextn_layers < 0 || c.num_nextn_layers >= blocks) {
    return Status::Error(f.path() + ": " + p + "nextn_predict_layers " +
                         std::to_string(c.num_nextn_layers) + " leaves no trunk of the " +
                         std::to_string(blocks) + " blocks");
  }
  c.num_layers = blocks - c.num_nextn_layers;
  ASSIGN_OR_RETURN(c.intermediate_size, f.GetI64(p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_heads, f.GetI64(p + "attention.head_count"));
  ASSIGN_OR_RETURN(auto kv_heads, f.FindI64(p + "attention.head_count_kv"));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);
  ASSIGN_OR_RETURN(c.max_position_embeddings, f.GetI64(p + "context_length"));
  ASSIGN_OR_RETURN(c.rms_norm_eps, f.GetF32(p + "attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(auto key_length, f.FindI64(p + "attention.key_length"));
  c.head_dim = key_length.value_or(c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  ASSIGN_OR_RETURN(auto rope_dims, f.FindI64(p + "rope.dimension_count"));
  c.rotary_dims = rope_dims.value_or(c.head_dim);
  // llama.cpp permutes Q/K rows of `llama` files into adjacent (interleaved)
  // pairs; glm4moe and qwen3moe keep HF's layout and use NeoX (half-split) RoPE.
  c.rope_pairing = arch == "llama" ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  RETURN_IF_ERROR(ReadRope(f, p, c));

  ASSIGN_OR_RETURN(auto vocab, f.FindI64(p + "vocab_size"));
  if (vocab) {
    c.vocab_size = *vocab;
  } else if (const TensorInfo* emb = f.Find("token_embd.weight")) {
    c.vocab_size = emb->shape[0];
  }
  c.tie_word_embeddings = f.Find("output.weight") == nullptr;
  c.attention_bias = f.Find("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.Find("blk.0.attn_q_norm.weight") != nullptr;
  c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kDense);
  RETURN_IF_ERROR(ReadMoe(f, p, c));
  if (arch == "deepseek2" || arch == "glm-dsa") RETURN_IF_ERROR(ReadMla(f, p, c));
  if (arch == "glm-dsa") RETURN_IF_ERROR(ReadDsa(f, p, c));
  RETURN_IF_ERROR(ValidateConfig(c, f.path()));
  return c;
}

}  // namespace anymoe
