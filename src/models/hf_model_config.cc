// ModelConfig from a Hugging Face config.json, per architecture, following the
// transformers config classes (defaults, aliases, and which keys they ignore;
// see docs/models.md). Unknown architectures are an error naming the known ones.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "models/config_loader.h"
#include "models/config_validation.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

template <typename T>
T JsonOr(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// v5 writes `rope_parameters` (with rope_theta inside); v4 `rope_theta` + `rope_scaling`.
Status ReadRope(const json& j, int64_t rope_head_dim, ModelConfig& c, const std::string& where) {
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  if (auto it = j.find("rope_scaling"); params == nullptr && it != j.end() && it->is_object()) {
    params = &*it;
  }
  c.rope_theta = JsonOr<double>(j, "rope_theta", 10000.0);
  double partial = JsonOr<double>(j, "partial_rotary_factor", 1.0);
  if (params != nullptr) {
    const json& r = *params;
    c.rope_theta = JsonOr<double>(r, "rope_theta", c.rope_theta);
    partial = JsonOr<double>(r, "partial_rotary_factor", partial);
    const std::string type =
        JsonOr<std::string>(r, "rope_type", JsonOr<std::string>(r, "type", ""));
    ASSIGN_OR_RETURN(c.rope_scaling.type, RopeTypeFromName(type, where));
    RopeScaling& s = c.rope_scaling;
    s.factor = JsonOr<double>(r, "factor", 1.0);
    s.original_max_position =
        JsonOr<double>(r, "original_max_position_embeddings", double(c.max_position_embeddings));
    s.low_freq_factor = JsonOr<double>(r, "low_freq_factor", 1.0);
    s.high_freq_factor = JsonOr<double>(r, "high_freq_factor", 4.0);
    s.beta_fast = JsonOr<double>(r, "beta_fast", 32.0);
    s.beta_slow = JsonOr<double>(r, "beta_slow", 1.0);
    s.mscale = JsonOr<double>(r, "mscale", 0.0);
    s.mscale_all_dim = JsonOr<double>(r, "mscale_all_dim", 0.0);
    s.attention_factor = JsonOr<double>(r, "attention_factor", 0.0);
    s.truncate = JsonOr<bool>(r, "truncate", true);
  }
  c.rotary_dims = int64_t(double(rope_head_dim) * partial);
  return Status::Ok();
}

void ReadCommon(const json& j, ModelConfig& c) {
  c.vocab_size = JsonOr<int64_t>(j, "vocab_size", 0);
  c.hidden_size = JsonOr<int64_t>(j, "hidden_size", 0);
  c.num_layers = JsonOr<int64_t>(j, "num_hidden_layers", 0);
  c.num_nextn_layers = std::max<int64_t>(0, JsonOr<int64_t>(j, "num_nextn_predict_layers", 0));
  c.num_heads = JsonOr<int64_t>(j, "num_attention_heads", 0);
  c.num_kv_heads = JsonOr<int64_t>(j, "num_key_value_heads", c.num_heads);
  c.head_dim = JsonOr<int64_t>(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.intermediate_size = JsonOr<int64_t>(j, "intermediate_size", 0);
  c.max_position_embeddings = JsonOr<int64_t>(j, "max_position_embeddings", 2048);
  c.rms_norm_eps = JsonOr<float>(j, "rms_norm_eps", 1e-6f);
  c.tie_word_embeddings = JsonOr<bool>(j, "tie_word_embeddings", false);
  c.attention_bias = JsonOr<bool>(j, "attention_bias", false);
  c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kDense);
}

// DeepSeek-style "noaux_tc" router: sigmoid, selection bias, groups, scaling.
void ReadSigmoidMoe(const json& j, ModelConfig& c) {
  MoeConfig& m = c.moe;
  m.num_experts = JsonOr<int64_t>(j, "n_routed_experts", 0);
  m.experts_per_token = JsonOr<int64_t>(j, "num_experts_per_tok", 0);
  m.expert_ffn = JsonOr<int64_t>(j, "moe_intermediate_size", 0);
  m.shared_ffn = m.expert_ffn * JsonOr<int64_t>(j, "n_shared_experts", 0);
  m.n_group = JsonOr<int64_t>(j, "n_group", 1);
  m.topk_group = JsonOr<int64_t>(j, "topk_group", 1);
  m.norm_topk_prob = JsonOr<bool>(j, "norm_topk_prob", true);
  m.routed_scaling_factor = JsonOr<float>(j, "routed_scaling_factor", 1.0f);
  m.scoring = MoeConfig::Scoring::kSigmoid;
  m.selection_bias = true;
}

// `mlp_layer_types` when present, else the first `first_dense` layers dense.
void ReadDenseLayers(const json& j, ModelConfig& c, int64_t first_dense) {
  if (auto it = j.find("mlp_layer_types"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size() && i < c.ffn_kinds.size(); ++i) {
      c.ffn_kinds[i] = (*it)[i] == "dense" ? FfnKind::kDense : FfnKind::kMoe;
    }
    return;
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.ffn_kinds[size_t(i)] = i < first_dense ? FfnKind::kDense : FfnKind::kMoe;
  }
}

Status ReadMla(const json& j, ModelConfig& c, const std::string& where) {
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  m.q_lora_rank = JsonOr<int64_t>(j, "q_lora_rank", 0);
  m.kv_lora_rank = JsonOr<int64_t>(j, "kv_lora_rank", 0);
  m.qk_nope_head_dim = JsonOr<int64_t>(j, "qk_nope_head_dim", 0);
  m.qk_rope_head_dim = JsonOr<int64_t>(j, "qk_rope_head_dim", 0);
  if (c.arch == "glm4_moe_lite" && j.contains("head_dim")) {
    m.qk_rope_head_dim = JsonOr<int64_t>(j, "head_dim", m.qk_rope_head_dim);  // attribute_map alias
  }
  m.v_head_dim = JsonOr<int64_t>(j, "v_head_dim", 0);
  c.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;  // a `head_dim` key is ignored (GLM-5.2)
  c.num_kv_heads = c.num_heads;
  c.rope_pairing =
      JsonOr<bool>(j, "rope_interleave", true) ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  return ReadRope(j, m.qk_rope_head_dim, c, where);
}

// GLM-5's indexer and its full/shared layer schedule.
Status ReadDsa(const json& j, ModelConfig& c, const std::string& where) {
  DsaConfig& d = c.dsa;
  d.n_heads = JsonOr<int64_t>(j, "index_n_heads", 0);
  d.head_dim = JsonOr<int64_t>(j, "index_head_dim", 0);
  d.topk = JsonOr<int64_t>(j, "index_topk", 0);
  d.pairing = JsonOr<bool>(j, "indexer_rope_interleave", true) ? RopePairing::kInterleaved
                                                               : RopePairing::kHalfSplit;
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  if (auto it = j.find("indexer_types"); it != j.end() && it->is_array()) {
    if (it->size() != size_t(c.num_layers)) {
      return Status::Error(where + ": indexer_types has " + std::to_string(it->size()) +
                           " entries for " + std::to_string(c.num_layers) + " layers");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      c.indexer_kinds[i] = (*it)[i] == "shared" ? IndexerKind::kShared : IndexerKind::kFull;
    }
  } else if (auto p = j.find("index_topk_pattern"); p != j.end() && p->is_string()) {
    const std::string pattern = p->get<std::string>();
    for (size_t i = 0; i < pattern.size() && i < c.indexer_kinds.size(); ++i) {
      c.indexer_kinds[i] = pattern[i] == 'S' ? IndexerKind::kShared : IndexerKind::kFull;
    }
  } else if (j.contains("index_topk_freq")) {
    const int64_t freq = JsonOr<int64_t>(j, "index_topk_freq", 1);
    const int64_t offset = JsonOr<int64_t>(j, "index_skip_topk_offset", 0);
    for (int64_t i = 0; i < c.num_layers && freq > 0; ++i) {
      const bool full = std::max<int64_t>(i - offset + 1, 0) % freq == 0;
      c.indexer_kinds[size_t(i)] = full ? IndexerKind::kFull : IndexerKind::kShared;
    }
  }
  return Status::Ok();
}

Status ReadArchitecture(const json& j, ModelConfig& c, const std::string& where) {
  const std::string& a = c.arch;
  if (a == "llama") return ReadRope(j, c.head_dim, c, where);
  if (a == "qwen3_moe") {
    c.qk_norm = true;
    MoeConfig& m = c.moe;
    // Real Qwen3 checkpoints say num_experts; transformers 5.x writes num_local_experts.
    m.num_experts = JsonOr<int64_t>(j, "num_experts", JsonOr<int64_t>(j, "num_local_experts", 0));
    m.experts_per_token = JsonOr<int64_t>(j, "num_experts_per_tok", 0);
    m.expert_ffn = JsonOr<int64_t>(j, "moe_intermediate_size", 0);
    m.norm_topk_prob = JsonOr<bool>(j, "norm_topk_prob", false);
    const auto dense = JsonOr<std::vector<int64_t>>(j, "mlp_only_layers", {});
    const int64_t step = JsonOr<int64_t>(j, "decoder_sparse_step", 1);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool moe = std::find(dense.begin(), dense.end(), i) == dense.end() &&
                       m.num_experts > 0 && step > 0 && (i + 1) % step == 0;
      c.ffn_kinds[size_t(i)] = moe ? FfnKind::kMoe : FfnKind::kDense;
    }
    return ReadRope(j, c.head_dim, c, where);
  }
  if (a == "mixtral") {
    MoeConfig& m = c.moe;
    m.num_experts = JsonOr<int64_t>(j, "num_local_experts", 0);
    m.experts_per_token = JsonOr<int64_t>(j, "num_experts_per_tok", 0);
    m.expert_ffn = c.intermediate_size;
    m.norm_topk_prob = true;  // Mixtral always renormalises its top-k
    c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kMoe);
    return ReadRope(j, c.head_dim, c, where);
  }
  if (a == "glm4_moe") {
    c.qk_norm = JsonOr<bool>(j, "use_qk_norm", false);
    ReadSigmoidMoe(j, c);
    ReadDenseLayers(j, c, JsonOr<int64_t>(j, "first_k_dense_replace", 0));
    return ReadRope(j, c.head_dim, c, where);
  }
  if (a == "deepseek_v3" || a == "glm4_moe_lite" || a == "glm_moe_dsa") {
    ReadSigmoidMoe(j, c);
    // glm4_moe_lite ignores first_k_dense_replace when mlp_layer_types is absent.
    ReadDenseLayers(j, c, a == "glm4_moe_lite" ? 1 : JsonOr<int64_t>(j, "first_k_dense_replace", 0));
    RETURN_IF_ERROR(ReadMla(j, c, where));
    if (a == "glm_moe_dsa") RETURN_IF_ERROR(ReadDsa(j, c, where));
    return Status::Ok();
  }
  return Status::Error(where + ": model_type '" + a +
                       "' is not supported (supported: llama, qwen3_moe, mixtral, glm4_moe, "
                       "deepseek_v3, glm4_moe_lite, glm_moe_dsa)");
}

}  // namespace

Expected<ModelConfig> ModelConfigFromHf(const HfConfig& hf) {
  const std::string& where = hf.path();
  const json& j = hf.json();
  ModelConfig c;
  try {
    c.arch = JsonOr<std::string>(j, "model_type", "");
    ReadCommon(j, c);
    RETURN_IF_ERROR(ReadArchitecture(j, c, where));
  } catch (const json::exception& e) {
    return Status::Error(where + ": bad value in config.json: " + e.what());
  }
  RETURN_IF_ERROR(ValidateConfig(c, where));
  return c;
}

}  // namespace anymoe
