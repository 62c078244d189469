// ModelConfig from a Hugging Face config.json, per architecture, following the
// transformers config classes (defaults, aliases, and which keys they ignore;
// see docs/models.md). Unknown architectures are an error naming the known ones.
// Every field is read through Fields, which checks its type and range and
// names the key on error (an integer field refuses 64.5 and 1e300 rather than
// truncating or casting out of range), and the layer count is checked before
// any per-layer table is sized from it.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "formats/parse_util.h"
#include "models/config_loader.h"
#include "models/config_validation.h"
#include "models/supported_architectures.h"

namespace anymoe {
namespace {

using json = nlohmann::json;
using B = ConfigBounds;

// Typed, range-checked reads of one JSON object's keys. An absent or null key
// gives the fallback; a present one of the wrong type or out of range is an
// error "<file>: <section><key> = <value> <problem>".
class Fields {
 public:
  Fields(const json& object, const std::string& where, std::string section = "")
      : j_(object), where_(where), section_(std::move(section)) {}

  const json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool Has(const char* key) const { return Find(key) != nullptr; }

  Expected<int64_t> Int(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    const std::optional<int64_t> i = JsonInteger(*v);
    if (!i) return Error(key, *v, "is not an integer");
    if (*i < lo || *i > hi) {
      return Error(key, *v,
                   "is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return *i;
  }
  // A finite number in [lo, hi].
  Expected<double> Real(const char* key, double fallback, double lo, double hi) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) return Error(key, *v, "is not a number");
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      return Error(key, *v, "is out of range [" + Number(lo) + ", " + Number(hi) + "]");
    }
    return d;
  }
  Expected<bool> Bool(const char* key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, *v, "is not a boolean");
    return v->get<bool>();
  }
  Expected<std::string> String(const char* key, const std::string& fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) return Error(key, *v, "is not a string");
    return v->get<std::string>();
  }
  // An array of at most `max_items` integers in [lo, hi]; absent: empty.
  Expected<std::vector<int64_t>> IntList(const char* key, size_t max_items, int64_t lo,
                                         int64_t hi) const {
    std::vector<int64_t> out;
    const json* v = Find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) return Error(key, *v, "is not an array");
    if (v->size() > max_items) {
      return Error(
          key, *v,
          "has " + std::to_string(v->size()) + " entries, over " + std::to_string(max_items));
    }
    for (const json& e : *v) {
      const std::optional<int64_t> i = JsonInteger(e);
      if (!i || *i < lo || *i > hi) {
        return Error(key, e,
                     "has an entry that is not an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
      }
      out.push_back(*i);
    }
    return out;
  }
  // An array whose entries are each one of two strings; absent: nullopt.
  Expected<std::optional<std::vector<bool>>> Choices(const char* key, const char* first,
                                                     const char* second, size_t size) const {
    const json* v = Find(key);
    if (v == nullptr) return std::optional<std::vector<bool>>();
    if (!v->is_array() || v->size() != size) {
      return Error(key, *v, "must list " + std::to_string(size) + " layers");
    }
    std::vector<bool> out;
    for (const json& e : *v) {
      if (!e.is_string() || (e != first && e != second)) {
        return Error(
            key, e,
            std::string("has an entry that is neither \"") + first + "\" nor \"" + second + "\"");
      }
      out.push_back(e == first);
    }
    return std::optional<std::vector<bool>>(std::move(out));
  }

  Status Error(const char* key, const json& v, const std::string& problem) const {
    return Status::Error(where_ + ": " + section_ + key + " = " + DescribeJson(v) + " " + problem);
  }

 private:
  static std::string Number(double d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", d);
    return buf;
  }
  const json& j_;
  const std::string& where_;
  std::string section_;
};

// v5 writes `rope_parameters` (with rope_theta inside); v4 `rope_theta` + `rope_scaling`.
Status ReadRope(const Fields& top, const json& j, int64_t rope_head_dim, ModelConfig& c,
                const std::string& where) {
  const json* params = nullptr;
  std::string section;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) {
    params = &*it;
    section = "rope_parameters.";
  }
  if (auto it = j.find("rope_scaling"); params == nullptr && it != j.end() && it->is_object()) {
    params = &*it;
    section = "rope_scaling.";
  }
  ASSIGN_OR_RETURN(c.rope_theta, top.Real("rope_theta", 10000.0, 1e-6, 1e12));
  ASSIGN_OR_RETURN(double partial, top.Real("partial_rotary_factor", 1.0, 1e-6, 1.0));
  if (params != nullptr) {
    const Fields r(*params, where, section);
    ASSIGN_OR_RETURN(c.rope_theta, r.Real("rope_theta", c.rope_theta, 1e-6, 1e12));
    ASSIGN_OR_RETURN(partial, r.Real("partial_rotary_factor", partial, 1e-6, 1.0));
    ASSIGN_OR_RETURN(const std::string old_type, r.String("type", ""));
    ASSIGN_OR_RETURN(const std::string type, r.String("rope_type", old_type));
    ASSIGN_OR_RETURN(c.rope_scaling.type, RopeTypeFromName(type, where));
    RopeScaling& s = c.rope_scaling;
    const double big = B::kMaxFactor;
    // Factors and lengths must be positive: a negative factor would mirror
    // the rotation (issue 20). Exact ranges: ValidateRopeScaling.
    ASSIGN_OR_RETURN(s.factor, r.Real("factor", 1.0, 1e-6, big));
    ASSIGN_OR_RETURN(s.original_max_position,
                     r.Real("original_max_position_embeddings", double(c.max_position_embeddings),
                            1, double(B::kPositions)));
    ASSIGN_OR_RETURN(s.low_freq_factor, r.Real("low_freq_factor", 1.0, 1e-6, big));
    ASSIGN_OR_RETURN(s.high_freq_factor, r.Real("high_freq_factor", 4.0, 1e-6, big));
    ASSIGN_OR_RETURN(s.beta_fast, r.Real("beta_fast", 32.0, 0, big));
    ASSIGN_OR_RETURN(s.beta_slow, r.Real("beta_slow", 1.0, 0, big));
    ASSIGN_OR_RETURN(s.mscale, r.Real("mscale", 0.0, 0, big));
    ASSIGN_OR_RETURN(s.mscale_all_dim, r.Real("mscale_all_dim", 0.0, 0, big));
    ASSIGN_OR_RETURN(s.attention_factor, r.Real("attention_factor", 0.0, 0, big));
    ASSIGN_OR_RETURN(s.truncate, r.Bool("truncate", true));
  }
  c.rotary_dims = int64_t(double(rope_head_dim) * partial);  // both bounded: no overflow
  return Status::Ok();
}

// The fields every architecture has; all scalars, so nothing is sized yet.
Status ReadCommon(const Fields& f, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 0, 1, B::kVocab));
  ASSIGN_OR_RETURN(c.hidden_size, f.Int("hidden_size", 0, 1, B::kHidden));
  ASSIGN_OR_RETURN(c.num_layers, f.Int("num_hidden_layers", 0, 1, B::kLayers));
  ASSIGN_OR_RETURN(c.num_nextn_layers, f.Int("num_nextn_predict_layers", 0, 0, B::kLayers));
  ASSIGN_OR_RETURN(c.num_heads, f.Int("num_attention_heads", 0, 1, B::kHeads));
  ASSIGN_OR_RETURN(c.num_kv_heads, f.Int("num_key_value_heads", c.num_heads, 1, B::kHeads));
  // Glm5NextTextConfig writes head_dim = qk_rope_head_dim = 0 (NoPE); ReadGlm5Next sets it.
  ASSIGN_OR_RETURN(c.head_dim, f.Int("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0,
                                     c.arch == "glm5_next" ? 0 : 1, B::kHeadDim));
  ASSIGN_OR_RETURN(c.intermediate_size, f.Int("intermediate_size", 0, 0, B::kFfn));
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   f.Int("max_position_embeddings", 2048, 1, B::kPositions));
  ASSIGN_OR_RETURN(const double eps, f.Real("rms_norm_eps", 1e-6, 0, 1));
  c.rms_norm_eps = float(eps);
  ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
  return Status::Ok();
}

// DeepSeek-style "noaux_tc" router: sigmoid, selection bias, groups, scaling.
Status ReadSigmoidMoe(const Fields& f, ModelConfig& c) {
  MoeConfig& m = c.moe;
  ASSIGN_OR_RETURN(m.num_experts, f.Int("n_routed_experts", 0, 0, B::kExperts));
  ASSIGN_OR_RETURN(m.experts_per_token, f.Int("num_experts_per_tok", 0, 0, B::kExperts));
  ASSIGN_OR_RETURN(m.expert_ffn, f.Int("moe_intermediate_size", 0, 0, B::kFfn));
  ASSIGN_OR_RETURN(const int64_t shared, f.Int("n_shared_experts", 0, 0, 64));
  m.shared_ffn = m.expert_ffn * shared;
  ASSIGN_OR_RETURN(m.n_group, f.Int("n_group", 1, 1, B::kExperts));
  ASSIGN_OR_RETURN(m.topk_group, f.Int("topk_group", 1, 1, B::kExperts));
  ASSIGN_OR_RETURN(m.norm_topk_prob, f.Bool("norm_topk_prob", true));
  ASSIGN_OR_RETURN(const double scale, f.Real("routed_scaling_factor", 1.0, 1e-6, B::kMaxFactor));
  m.routed_scaling_factor = float(scale);
  m.scoring = MoeConfig::Scoring::kSigmoid;
  m.selection_bias = true;
  return Status::Ok();
}

// `mlp_layer_types` when present, else the first `first_dense` layers dense.
Status ReadDenseLayers(const Fields& f, ModelConfig& c, int64_t first_dense) {
  ASSIGN_OR_RETURN(auto types, f.Choices("mlp_layer_types", "dense", "sparse", c.ffn_kinds.size()));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool dense = types ? bool((*types)[size_t(i)]) : i < first_dense;
    c.ffn_kinds[size_t(i)] = dense ? FfnKind::kDense : FfnKind::kMoe;
  }
  return Status::Ok();
}

Status ReadMla(const Fields& f, const json& j, ModelConfig& c, const std::string& where) {
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  ASSIGN_OR_RETURN(m.q_lora_rank, f.Int("q_lora_rank", 0, 0, B::kRank));
  ASSIGN_OR_RETURN(m.kv_lora_rank, f.Int("kv_lora_rank", 0, 0, B::kRank));
  ASSIGN_OR_RETURN(m.qk_nope_head_dim, f.Int("qk_nope_head_dim", 0, 0, B::kHeadDim));
  ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.Int("qk_rope_head_dim", 0, 0, B::kHeadDim));
  if (c.arch == "glm4_moe_lite" && f.Has("head_dim")) {
    // attribute_map alias
    ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.Int("head_dim", m.qk_rope_head_dim, 1, B::kHeadDim));
  }
  ASSIGN_OR_RETURN(m.v_head_dim, f.Int("v_head_dim", 0, 0, B::kHeadDim));
  c.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;  // a `head_dim` key is ignored (GLM-5.2)
  c.num_kv_heads = c.num_heads;
  // DeepseekV32Attention always calls the interleaved helper; it has no such field.
  ASSIGN_OR_RETURN(bool interleave, f.Bool("rope_interleave", true));
  if (c.arch == "deepseek_v32") interleave = true;
  c.rope_pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  return ReadRope(f, j, m.qk_rope_head_dim, c, where);
}

// The lightning indexer: GLM-5's, with its full/shared layer schedule, or
// DeepSeek-V3.2's, which runs in every layer and rotates half-split pairs.
Status ReadDsa(const Fields& f, ModelConfig& c) {
  DsaConfig& d = c.dsa;
  const bool deepseek = c.arch == "deepseek_v32";
  // DeepseekV32Config's defaults; GlmMoeDsaConfig's come with every released config.
  ASSIGN_OR_RETURN(d.n_heads, f.Int("index_n_heads", deepseek ? 64 : 0, 0, B::kHeads));
  ASSIGN_OR_RETURN(d.head_dim, f.Int("index_head_dim", deepseek ? 128 : 0, 0, B::kHeadDim));
  ASSIGN_OR_RETURN(d.topk, f.Int("index_topk", deepseek ? 2048 : 0, 0, B::kPositions));
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  if (deepseek) {
    // DeepseekV32Indexer calls the half-split apply_rotary_pos_emb and reads no
    // indexer_rope_interleave / indexer_types (shared/new-archs.md §2.2).
    d.pairing = RopePairing::kHalfSplit;
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(const bool interleave, f.Bool("indexer_rope_interleave", true));
  d.pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  ASSIGN_OR_RETURN(auto types,
                   f.Choices("indexer_types", "full", "shared", c.indexer_kinds.size()));
  ASSIGN_OR_RETURN(const std::string pattern, f.String("index_topk_pattern", ""));
  if (types) {
    for (size_t i = 0; i < types->size(); ++i) {
      c.indexer_kinds[i] = (*types)[i] ? IndexerKind::kFull : IndexerKind::kShared;
    }
  } else if (f.Has("index_topk_pattern")) {
    for (size_t i = 0; i < pattern.size() && i < c.indexer_kinds.size(); ++i) {
      c.indexer_kinds[i] = pattern[i] == 'S' ? IndexerKind::kShared : IndexerKind::kFull;
    }
  } else if (f.Has("index_topk_freq")) {
    ASSIGN_OR_RETURN(const int64_t freq, f.Int("index_topk_freq", 1, 1, c.num_layers));
    ASSIGN_OR_RETURN(const int64_t offset, f.Int("index_skip_topk_offset", 0, 0, c.num_layers));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool full = std::max<int64_t>(i - offset + 1, 0) % freq == 0;
      c.indexer_kinds[size_t(i)] = full ? IndexerKind::kFull : IndexerKind::kShared;
    }
  }
  return Status::Ok();
}

// GLM-5.3-Flash (Glm5NextTextConfig): KDA linear attention in most layers,
// NoPE MLA with the KPool DSA indexer in the rest, mHC hyper-connections,
// SwiGLU clamp; the MoE is DeepSeek-V3's. Defaults are the config class's.
Status ReadGlm5Next(const Fields& f, const json& j, ModelConfig& c, const std::string& where) {
  RETURN_IF_ERROR(ReadSigmoidMoe(f, c));
  RETURN_IF_ERROR(ReadDenseLayers(f, c, 3));  // the class's schedule: 3 dense layers
  MlaConfig& m = c.mla;
  c.attention = AttentionKind::kMla;
  ASSIGN_OR_RETURN(m.q_lora_rank, f.Int("q_lora_rank", 1536, 1, B::kRank));
  ASSIGN_OR_RETURN(m.kv_lora_rank, f.Int("kv_lora_rank", 512, 1, B::kRank));
  ASSIGN_OR_RETURN(m.qk_nope_head_dim, f.Int("qk_nope_head_dim", 256, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.Int("qk_rope_head_dim", 0, 0, 0));  // NoPE: > 0 refused
  ASSIGN_OR_RETURN(m.v_head_dim, f.Int("v_head_dim", 256, 1, B::kHeadDim));
  m.latent_norm_eps = c.rms_norm_eps;  // q_a/kv_a norms take rms_norm_eps here (new-archs §1.11)
  c.head_dim = m.qk_nope_head_dim;
  c.num_kv_heads = c.num_heads;
  c.rotary_dims = 0;
  DsaConfig& d = c.dsa;
  ASSIGN_OR_RETURN(d.n_heads, f.Int("index_n_heads", 32, 1, B::kHeads));
  ASSIGN_OR_RETURN(d.head_dim, f.Int("index_head_dim", 128, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(d.topk, f.Int("index_topk", 2048, 1, B::kPositions));
  ASSIGN_OR_RETURN(c.kpool.pool, f.Int("index_kpool", 16, 1, 4096));
  ASSIGN_OR_RETURN(c.kpool.select_tail, f.Bool("index_kpool_always_select_tail", true));
  if (d.topk % c.kpool.pool != 0) {
    return Status::Error(where + ": index_topk " + std::to_string(d.topk) +
                         " is not a multiple of index_kpool " + std::to_string(c.kpool.pool));
  }
  c.indexer_kinds.assign(size_t(c.num_layers), IndexerKind::kFull);
  ASSIGN_OR_RETURN(auto indexers,
                   f.Choices("indexer_types", "full", "shared", c.indexer_kinds.size()));
  if (indexers) {
    for (size_t i = 0; i < indexers->size(); ++i) {
      c.indexer_kinds[i] = (*indexers)[i] ? IndexerKind::kFull : IndexerKind::kShared;
    }
  }
  // layer_types: "linear_attention" or the indexed MLA ("indexed_attention",
  // "full_attention" renamed so by the config class); default every 4th indexed.
  c.mixer_kinds.assign(size_t(c.num_layers), MixerKind::kLinear);
  const json* types = f.Find("layer_types");
  if (types != nullptr && (!types->is_array() || types->size() != size_t(c.num_layers))) {
    return f.Error("layer_types", *types, "must list " + std::to_string(c.num_layers) + " layers");
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    bool linear = i % 4 != 3;
    if (types != nullptr) {
      const json& e = (*types)[size_t(i)];
      linear = e == "linear_attention";
      if (!linear && e != "indexed_attention" && e != "full_attention") {
        return f.Error("layer_types", e,
                       "is none of \"linear_attention\", \"indexed_attention\", \"full_attention\"");
      }
    }
    c.mixer_kinds[size_t(i)] = linear ? MixerKind::kLinear : MixerKind::kAttention;
    if (linear) c.indexer_kinds[size_t(i)] = IndexerKind::kNone;
  }
  KdaConfig& k = c.kda;
  ASSIGN_OR_RETURN(k.num_heads, f.Int("linear_num_heads", 64, 1, B::kHeads));
  ASSIGN_OR_RETURN(k.head_dim, f.Int("linear_head_dim", 128, 1, B::kHeadDim));
  ASSIGN_OR_RETURN(k.conv_kernel, f.Int("linear_conv_kernel_dim", 4, 1, 64));
  const json* lb = f.Find("linear_lower_bound");
  k.bounded_gate = j.find("linear_lower_bound") == j.end() || lb != nullptr;  // absent: -5 default
  ASSIGN_OR_RETURN(const double bound, f.Real("linear_lower_bound", -5.0, -1e6, 0));
  k.lower_bound = float(bound);
  HyperConnectionConfig& hc = c.hc;
  ASSIGN_OR_RETURN(hc.mult, f.Int("hc_mult", 4, 1, 64));
  ASSIGN_OR_RETURN(hc.sinkhorn_iters, f.Int("hc_sinkhorn_iters", 20, 1, 1000));
  ASSIGN_OR_RETURN(const double hc_eps, f.Real("hc_eps", 1e-6, 0, 1));
  hc.eps = float(hc_eps);
  ASSIGN_OR_RETURN(const double limit, f.Real("swiglu_limit", 10.0, 0, 1e30));
  c.swiglu_limit = float(limit);
  return Status::Ok();
}

Status ReadArchitecture(const Fields& f, const json& j, ModelConfig& c, const std::string& where) {
  const std::string& a = c.arch;
  if (a == "glm5_next") return ReadGlm5Next(f, j, c, where);
  if (a == "llama") return ReadRope(f, j, c.head_dim, c, where);
  if (a == "qwen3_moe") {
    c.qk_norm = true;
    MoeConfig& m = c.moe;
    // Real Qwen3 checkpoints say num_experts; transformers 5.x writes num_local_experts.
    ASSIGN_OR_RETURN(const int64_t local, f.Int("num_local_experts", 0, 0, B::kExperts));
    ASSIGN_OR_RETURN(m.num_experts, f.Int("num_experts", local, 0, B::kExperts));
    ASSIGN_OR_RETURN(m.experts_per_token, f.Int("num_experts_per_tok", 0, 0, B::kExperts));
    ASSIGN_OR_RETURN(m.expert_ffn, f.Int("moe_intermediate_size", 0, 0, B::kFfn));
    ASSIGN_OR_RETURN(m.norm_topk_prob, f.Bool("norm_topk_prob", false));
    ASSIGN_OR_RETURN(const std::vector<int64_t> dense,
                     f.IntList("mlp_only_layers", size_t(c.num_layers), 0, c.num_layers - 1));
    ASSIGN_OR_RETURN(const int64_t step, f.Int("decoder_sparse_step", 1, 0, c.num_layers));
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool moe = std::find(dense.begin(), dense.end(), i) == dense.end() &&
                       m.num_experts > 0 && step > 0 && (i + 1) % step == 0;
      c.ffn_kinds[size_t(i)] = moe ? FfnKind::kMoe : FfnKind::kDense;
    }
    return ReadRope(f, j, c.head_dim, c, where);
  }
  if (a == "mixtral") {
    MoeConfig& m = c.moe;
    ASSIGN_OR_RETURN(m.num_experts, f.Int("num_local_experts", 0, 0, B::kExperts));
    ASSIGN_OR_RETURN(m.experts_per_token, f.Int("num_experts_per_tok", 0, 0, B::kExperts));
    m.expert_ffn = c.intermediate_size;
    m.norm_topk_prob = true;  // Mixtral always renormalises its top-k
    c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kMoe);
    return ReadRope(f, j, c.head_dim, c, where);
  }
  if (a == "glm4_moe") {
    ASSIGN_OR_RETURN(c.qk_norm, f.Bool("use_qk_norm", false));
    RETURN_IF_ERROR(ReadSigmoidMoe(f, c));
    ASSIGN_OR_RETURN(const int64_t first_dense, f.Int("first_k_dense_replace", 0, 0, c.num_layers));
    RETURN_IF_ERROR(ReadDenseLayers(f, c, first_dense));
    return ReadRope(f, j, c.head_dim, c, where);
  }
  if (a == "deepseek_v3" || a == "glm4_moe_lite" || a == "glm_moe_dsa" || a == "deepseek_v32" ||
      a == "kimi_k25") {
    RETURN_IF_ERROR(ReadSigmoidMoe(f, c));
    // glm4_moe_lite ignores first_k_dense_replace when mlp_layer_types is absent;
    // DeepseekV32Config defaults it to 3.
    ASSIGN_OR_RETURN(const int64_t first_dense,
                     f.Int("first_k_dense_replace", a == "deepseek_v32" ? 3 : 0, 0, c.num_layers));
    RETURN_IF_ERROR(ReadDenseLayers(f, c, a == "glm4_moe_lite" ? 1 : first_dense));
    RETURN_IF_ERROR(ReadMla(f, j, c, where));
    if (a == "glm_moe_dsa" || a == "deepseek_v32") RETURN_IF_ERROR(ReadDsa(f, c));
    return Status::Ok();
  }
  return Status::Error(where + ": model_type " + QuoteName(a) +
                       " is not supported (supported: " + SupportedHfModelTypes() + ")");
}

// A multimodal wrapper's text config (Kimi K2.5: a DeepSeek-V3 `text_config`,
// whose model_type the released config spells kimi_k2); the config itself otherwise.
Expected<const json*> TextConfig(const json& j, const std::string& arch, const std::string& where) {
  const TextModelWrapper wrapper = TextModelWrapperOf(arch);
  if (wrapper.text_config_key.empty()) return &j;
  const std::string key(wrapper.text_config_key);
  auto it = j.find(key);
  if (arch == "glm5_next") {
    // Glm5NextConfig: flat (text-only) checkpoints keep the text fields at the top level.
    if (it == j.end() || it->is_null()) return &j;
    if (!it->is_object()) {
      return Status::Error(where + ": " + key + " must be an object (the text model's config)");
    }
    ASSIGN_OR_RETURN(const std::string inner,
                     Fields(*it, where, key + ".").String("model_type", "glm5_next_text"));
    if (inner != "glm5_next_text") {
      return Status::Error(where + ": " + key + ".model_type " + QuoteName(inner) +
                           " of glm5_next is not supported (supported: glm5_next_text)");
    }
    return &*it;
  }
  if (it == j.end() || !it->is_object()) {
    return Status::Error(where + ": model_type " + QuoteName(arch) + " needs a \"" + key +
                         "\" object (its text model's config)");
  }
  ASSIGN_OR_RETURN(const std::string inner,
                   Fields(*it, where, key + ".").String("model_type", "deepseek_v3"));
  if (inner != "deepseek_v3" && inner != "kimi_k2") {
    return Status::Error(where + ": " + key + ".model_type " + QuoteName(inner) + " of " +
                         QuoteName(arch) + " is not supported (supported: deepseek_v3, kimi_k2)");
  }
  return &*it;
}

}  // namespace

Expected<ModelConfig> ModelConfigFromHf(const HfConfig& hf) {
  const std::string& where = hf.path();
  ModelConfig c;
  try {
    ASSIGN_OR_RETURN(c.arch, Fields(hf.json(), where).String("model_type", ""));
    ASSIGN_OR_RETURN(const json* text, TextConfig(hf.json(), c.arch, where));
    const json& j = *text;
    const std::string section =
        text == &hf.json() ? "" : std::string(TextModelWrapperOf(c.arch).text_config_key) + ".";
    const Fields f(j, where, section);
    RETURN_IF_ERROR(ReadCommon(f, c));
    // Only now, with num_layers within ConfigBounds::kLayers, is anything sized by it.
    c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kDense);
    RETURN_IF_ERROR(ReadArchitecture(f, j, c, where));
  } catch (const std::exception& e) {  // no accessor above throws; never let one out
    return Status::Error(where + ": bad value in config.json: " + e.what());
  }
  RETURN_IF_ERROR(ValidateConfig(c, where));
  return c;
}

}  // namespace anymoe
