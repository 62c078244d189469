#include "models/config_validation.h"

namespace anymoe {
namespace {

constexpr int64_t kMaxDim = int64_t(1) << 32;

class Checker {
 public:
  explicit Checker(const std::string& where) : where_(where) {}

  Status Positive(int64_t v, const char* name) const {
    if (v <= 0 || v > kMaxDim) return Fail(std::string(name) + " = " + std::to_string(v) +
                                           " is out of range");
    return Status::Ok();
  }
  Status Fail(const std::string& what) const { return Status::Error(where_ + ": " + what); }

 private:
  const std::string& where_;
};

Status ValidateMoe(const ModelConfig& c, const Checker& check) {
  const MoeConfig& m = c.moe;
  RETURN_IF_ERROR(check.Positive(m.num_experts, "num_experts"));
  RETURN_IF_ERROR(check.Positive(m.experts_per_token, "experts_per_token"));
  RETURN_IF_ERROR(check.Positive(m.expert_ffn, "moe_intermediate_size"));
  RETURN_IF_ERROR(check.Positive(m.n_group, "n_group"));
  RETURN_IF_ERROR(check.Positive(m.topk_group, "topk_group"));
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
  if (m.shared_ffn < 0) return check.Fail("negative shared expert width");
  return Status::Ok();
}

Status ValidateMla(const ModelConfig& c, const Checker& check) {
  const MlaConfig& m = c.mla;
  RETURN_IF_ERROR(check.Positive(m.kv_lora_rank, "kv_lora_rank"));
  RETURN_IF_ERROR(check.Positive(m.qk_nope_head_dim, "qk_nope_head_dim"));
  RETURN_IF_ERROR(check.Positive(m.qk_rope_head_dim, "qk_rope_head_dim"));
  RETURN_IF_ERROR(check.Positive(m.v_head_dim, "v_head_dim"));
  if (m.q_lora_rank < 0) return check.Fail("negative q_lora_rank");
  if (c.num_kv_heads != c.num_heads) return check.Fail("MLA needs num_key_value_heads == heads");
  if (c.dsa.topk > 0) {
    const DsaConfig& d = c.dsa;
    RETURN_IF_ERROR(check.Positive(d.n_heads, "index_n_heads"));
    RETURN_IF_ERROR(check.Positive(d.head_dim, "index_head_dim"));
    if (m.qk_rope_head_dim > d.head_dim) return check.Fail("qk_rope_head_dim > index_head_dim");
    if (m.q_lora_rank == 0) return check.Fail("the DSA indexer needs q_lora_rank");
    if (c.indexer_kinds.size() != size_t(c.num_layers) ||
        c.indexer_kinds[0] != IndexerKind::kFull) {
      return check.Fail("indexer_types must list every layer and start with \"full\"");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  const Checker check(where);
  RETURN_IF_ERROR(check.Positive(c.vocab_size, "vocab_size"));
  RETURN_IF_ERROR(check.Positive(c.hidden_size, "hidden_size"));
  RETURN_IF_ERROR(check.Positive(c.num_layers, "num_layers"));
  RETURN_IF_ERROR(check.Positive(c.num_heads, "num_heads"));
  RETURN_IF_ERROR(check.Positive(c.num_kv_heads, "num_kv_heads"));
  RETURN_IF_ERROR(check.Positive(c.head_dim, "head_dim"));
  RETURN_IF_ERROR(check.Positive(c.max_position_embeddings, "max_position_embeddings"));
  if (c.num_heads % c.num_kv_heads != 0) {
    return check.Fail("num_heads " + std::to_string(c.num_heads) +
                      " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
  }
  const int64_t rope_room = c.attention == AttentionKind::kMla ? c.mla.qk_rope_head_dim : c.head_dim;
  if (c.rotary_dims <= 0 || c.rotary_dims > rope_room || c.rotary_dims % 2 != 0) {
    return check.Fail("rotary dims " + std::to_string(c.rotary_dims) +
                      " must be even and within the head's " + std::to_string(rope_room));
  }
  if (c.ffn_kinds.size() != size_t(c.num_layers)) return check.Fail("per-layer MLP kinds missing");
  bool any_dense = false;
  for (FfnKind k : c.ffn_kinds) any_dense |= k == FfnKind::kDense;
  if (any_dense) RETURN_IF_ERROR(check.Positive(c.intermediate_size, "intermediate_size"));
  if (c.num_moe_layers() > 0) RETURN_IF_ERROR(ValidateMoe(c, check));
  if (c.attention == AttentionKind::kMla) RETURN_IF_ERROR(ValidateMla(c, check));
  return Status::Ok();
}

Expected<RopeScaling::Type> RopeTypeFromName(const std::string& name, const std::string& where) {
  if (name.empty() || name == "default" || name == "none") return RopeScaling::Type::kNone;
  if (name == "linear") return RopeScaling::Type::kLinear;
  if (name == "llama3") return RopeScaling::Type::kLlama3;
  if (name == "yarn") return RopeScaling::Type::kYarn;
  if (name == "dynamic") return RopeScaling::Type::kDynamic;
  return Status::Error(where + ": unsupported RoPE scaling type '" + name +
                       "' (supported: default, linear, llama3, yarn, dynamic)");
}

}  // namespace anymoe
