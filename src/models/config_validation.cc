// ModelConfig consistency: every size within ConfigBounds (again, whatever
// loader filled it), heads divisible, MoE routing able to pick its experts,
// MLA/DSA dimensions that fit together, RoPE numbers finite and positive.
#include "models/config_validation.h"

#include <cmath>

#include "formats/parse_util.h"

namespace anymoe {
namespace {

class Checker {
 public:
  explicit Checker(const std::string& where) : where_(where) {}

  Status InRange(int64_t v, const char* name, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi) {
      return Fail(std::string(name) + " = " + std::to_string(v) + " is out of range [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return Status::Ok();
  }
  Status Fail(const std::string& what) const { return Status::Error(where_ + ": " + what); }

 private:
  const std::string& where_;
};

using B = ConfigBounds;

Status ValidateMoe(const ModelConfig& c, const Checker& check) {
  const MoeConfig& m = c.moe;
  RETURN_IF_ERROR(check.InRange(m.num_experts, "num_experts", 1, B::kExperts));
  RETURN_IF_ERROR(check.InRange(m.experts_per_token, "experts_per_token", 1, B::kExperts));
  RETURN_IF_ERROR(check.InRange(m.expert_ffn, "moe_intermediate_size", 1, B::kFfn));
  RETURN_IF_ERROR(check.InRange(m.shared_ffn, "shared expert width", 0, B::kFfn));
  RETURN_IF_ERROR(check.InRange(m.n_group, "n_group", 1, B::kExperts));
  RETURN_IF_ERROR(check.InRange(m.topk_group, "topk_group", 1, B::kExperts));
  if (!std::isfinite(m.routed_scaling_factor) || m.routed_scaling_factor <= 0 ||
      m.routed_scaling_factor > B::kMaxFactor) {
    return check.Fail("routed_scaling_factor " + std::to_string(m.routed_scaling_factor) +
                      " is not in (0, 1e6]");
  }
  if (m.experts_per_token > m.num_experts) {
    return check.Fail("experts per token " + std::to_string(m.experts_per_token) +
                      " exceeds the " + std::to_string(m.num_experts) + " experts");
  }
  if (m.num_experts % m.n_group != 0 || m.topk_group > m.n_group ||
      (m.n_group > 1 && m.num_experts / m.n_group < 2) ||
      m.topk_group * (m.num_experts / m.n_group) < m.experts_per_token) {
    return check.Fail("group-limited routing with " + std::to_string(m.num_experts) +
                      " experts, n_group " + std::to_string(m.n_group) + ", topk_group " +
                      std::to_string(m.topk_group) + " cannot pick " +
                      std::to_string(m.experts_per_token) + " experts");
  }
  return Status::Ok();
}

Status ValidateMla(const ModelConfig& c, const Checker& check) {
  const MlaConfig& m = c.mla;
  RETURN_IF_ERROR(check.InRange(m.kv_lora_rank, "kv_lora_rank", 1, B::kRank));
  RETURN_IF_ERROR(check.InRange(m.q_lora_rank, "q_lora_rank", 0, B::kRank));
  RETURN_IF_ERROR(check.InRange(m.qk_nope_head_dim, "qk_nope_head_dim", 1, B::kHeadDim));
  // GLM-5.3's MLA has no positions at all (NoPE): no rope part.
  RETURN_IF_ERROR(check.InRange(m.qk_rope_head_dim, "qk_rope_head_dim", c.is_nope() ? 0 : 1,
                                c.is_nope() ? 0 : B::kHeadDim));
  RETURN_IF_ERROR(check.InRange(m.v_head_dim, "v_head_dim", 1, B::kHeadDim));
  if (c.num_kv_heads != c.num_heads) return check.Fail("MLA needs num_key_value_heads == heads");
  if (c.dsa.topk != 0) {
    const DsaConfig& d = c.dsa;
    RETURN_IF_ERROR(check.InRange(d.topk, "index_topk", 1, B::kPositions));
    RETURN_IF_ERROR(check.InRange(d.n_heads, "index_n_heads", 1, B::kHeads));
    RETURN_IF_ERROR(check.InRange(d.head_dim, "index_head_dim", 1, B::kHeadDim));
    if (m.qk_rope_head_dim > d.head_dim) return check.Fail("qk_rope_head_dim > index_head_dim");
    if (m.q_lora_rank == 0) return check.Fail("the DSA indexer needs q_lora_rank");
    if (c.indexer_kinds.size() != size_t(c.num_layers)) {
      return check.Fail("indexer_types must list every layer");
    }
    // A shared layer reuses the selection of the last full layer before it.
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (c.is_linear(i)) continue;
      if (c.indexer_kinds[size_t(i)] == IndexerKind::kShared) {
        return check.Fail("indexer_types: the first attention layer (" + std::to_string(i) +
                          ") must be \"full\"");
      }
      break;
    }
    if (c.kpool.pool > 0 && (c.kpool.pool > d.topk || d.topk % c.kpool.pool != 0)) {
      return check.Fail("index_topk " + std::to_string(d.topk) + " is not a multiple of index_kpool " +
                        std::to_string(c.kpool.pool));
    }
  }
  return Status::Ok();
}

// GLM-5.3-Flash: KDA layers beside the attention layers, mHC streams.
Status ValidateHybrid(const ModelConfig& c, const Checker& check) {
  if (c.mixer_kinds.size() != size_t(c.num_layers)) return check.Fail("layer_types must list every layer");
  bool any_linear = false;
  for (MixerKind k : c.mixer_kinds) any_linear |= k == MixerKind::kLinear;
  if (any_linear) {
    const KdaConfig& k = c.kda;
    RETURN_IF_ERROR(check.InRange(k.num_heads, "linear_num_heads", 1, B::kHeads));
    RETURN_IF_ERROR(check.InRange(k.head_dim, "linear_head_dim", 1, B::kHeadDim));
    RETURN_IF_ERROR(check.InRange(k.conv_kernel, "linear_conv_kernel_dim", 1, 64));
    if (!(k.lower_bound <= 0 && std::isfinite(k.lower_bound))) {
      return check.Fail("linear_lower_bound must be a finite value <= 0");
    }
  }
  RETURN_IF_ERROR(check.InRange(c.hc.mult, "hc_mult", 1, 64));
  RETURN_IF_ERROR(check.InRange(c.hc.sinkhorn_iters, "hc_sinkhorn_iters", 1, 1000));
  if (!(c.swiglu_limit >= 0 && std::isfinite(c.swiglu_limit))) {
    return check.Fail("swiglu_limit must be a finite value >= 0");
  }
  return Status::Ok();
}

bool PositiveFinite(double v, double hi) { return std::isfinite(v) && v > 0 && v <= hi; }
bool NonNegativeFinite(double v, double hi) { return std::isfinite(v) && v >= 0 && v <= hi; }

}  // namespace

Status ValidateRopeScaling(const RopeScaling& s, const std::string& where) {
  const auto fail = [&](const char* name, double v, const char* range) {
    return Status::Error(where + ": RoPE scaling " + name + " = " + std::to_string(v) +
                         " is not in " + range);
  };
  if (s.type == RopeScaling::Type::kNone) return Status::Ok();
  if (!PositiveFinite(s.factor, B::kMaxFactor)) return fail("factor", s.factor, "(0, 1e6]");
  if (!PositiveFinite(s.original_max_position, double(B::kPositions))) {
    return fail("original_max_position_embeddings", s.original_max_position, "(0, 2^24]");
  }
  if (!PositiveFinite(s.low_freq_factor, B::kMaxFactor)) {
    return fail("low_freq_factor", s.low_freq_factor, "(0, 1e6]");
  }
  if (!PositiveFinite(s.high_freq_factor, B::kMaxFactor)) {
    return fail("high_freq_factor", s.high_freq_factor, "(0, 1e6]");
  }
  if (!NonNegativeFinite(s.beta_fast, B::kMaxFactor)) {
    return fail("beta_fast", s.beta_fast, "[0, 1e6]");
  }
  if (!NonNegativeFinite(s.beta_slow, B::kMaxFactor)) {
    return fail("beta_slow", s.beta_slow, "[0, 1e6]");
  }
  if (!NonNegativeFinite(s.mscale, B::kMaxFactor)) return fail("mscale", s.mscale, "[0, 1e6]");
  if (!NonNegativeFinite(s.mscale_all_dim, B::kMaxFactor)) {
    return fail("mscale_all_dim", s.mscale_all_dim, "[0, 1e6]");
  }
  if (!NonNegativeFinite(s.attention_factor, B::kMaxFactor)) {
    return fail("attention_factor", s.attention_factor, "[0, 1e6]");
  }
  return Status::Ok();
}

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  const Checker check(where);
  RETURN_IF_ERROR(check.InRange(c.vocab_size, "vocab_size", 1, B::kVocab));
  RETURN_IF_ERROR(check.InRange(c.hidden_size, "hidden_size", 1, B::kHidden));
  RETURN_IF_ERROR(check.InRange(c.num_layers, "num_layers", 1, B::kLayers));
  RETURN_IF_ERROR(check.InRange(c.num_heads, "num_heads", 1, B::kHeads));
  RETURN_IF_ERROR(check.InRange(c.num_kv_heads, "num_kv_heads", 1, B::kHeads));
  RETURN_IF_ERROR(check.InRange(c.head_dim, "head_dim", 1, B::kHeadDim));
  RETURN_IF_ERROR(check.InRange(c.intermediate_size, "intermediate_size", 0, B::kFfn));
  RETURN_IF_ERROR(
      check.InRange(c.max_position_embeddings, "max_position_embeddings", 1, B::kPositions));
  if (!(c.rms_norm_eps >= 0.0f && c.rms_norm_eps <= 1.0f)) {
    return check.Fail("rms_norm_eps " + std::to_string(c.rms_norm_eps) + " is not in [0, 1]");
  }
  if (!PositiveFinite(c.rope_theta, 1e12)) {
    return check.Fail("rope_theta " + std::to_string(c.rope_theta) + " is not in (0, 1e12]");
  }
  RETURN_IF_ERROR(ValidateRopeScaling(c.rope_scaling, where));
  if (c.num_heads % c.num_kv_heads != 0) {
    return check.Fail("num_heads " + std::to_string(c.num_heads) +
                      " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
  }
  const int64_t rope_room = c.attention == AttentionKind::kMla ? c.mla.qk_rope_head_dim : c.head_dim;
  if (c.is_nope() ? c.rotary_dims != 0
                  : (c.rotary_dims <= 0 || c.rotary_dims > rope_room || c.rotary_dims % 2 != 0)) {
    return check.Fail("rotary dims " + std::to_string(c.rotary_dims) +
                      " must be even and within the head's " + std::to_string(rope_room));
  }
  if (c.ffn_kinds.size() != size_t(c.num_layers)) return check.Fail("per-layer MLP kinds missing");
  bool any_dense = false;
  for (FfnKind k : c.ffn_kinds) any_dense |= k == FfnKind::kDense;
  if (any_dense)
    RETURN_IF_ERROR(check.InRange(c.intermediate_size, "intermediate_size", 1, B::kFfn));
  if (c.num_moe_layers() > 0) RETURN_IF_ERROR(ValidateMoe(c, check));
  if (c.attention == AttentionKind::kMla) RETURN_IF_ERROR(ValidateMla(c, check));
  if (!c.mixer_kinds.empty()) RETURN_IF_ERROR(ValidateHybrid(c, check));
  return Status::Ok();
}

Expected<RopeScaling::Type> RopeTypeFromName(const std::string& name, const std::string& where) {
  if (name.empty() || name == "default" || name == "none") return RopeScaling::Type::kNone;
  if (name == "linear") return RopeScaling::Type::kLinear;
  if (name == "llama3") return RopeScaling::Type::kLlama3;
  if (name == "yarn") return RopeScaling::Type::kYarn;
  if (name == "dynamic") return RopeScaling::Type::kDynamic;
  return Status::Error(where + ": unsupported RoPE scaling type " + QuoteName(name) +
                       " (supported: default, linear, llama3, yarn, dynamic)");
}

}  // namespace anymoe
