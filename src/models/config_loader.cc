#include "models/config_loader.h"

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/hf_config.h"

namespace anymoe {
namespace {

using json = nlohmann::json;

Expected<RopeScaling::Type> RopeTypeFromName(const std::string& name, const std::string& where) {
  if (name.empty() || name == "default" || name == "none") return RopeScaling::Type::kNone;
  if (name == "linear") return RopeScaling::Type::kLinear;
  if (name == "llama3") return RopeScaling::Type::kLlama3;
  if (name == "yarn") return RopeScaling::Type::kYarn;
  if (name == "dynamic") return RopeScaling::Type::kDynamic;
  return Status::Error(where + ": unsupported RoPE scaling type '" + name +
                       "' (supported: default, linear, llama3, yarn, dynamic)");
}

Status ValidateSizes(const ModelConfig& c, const std::string& where) {
  auto positive = [&](int64_t v, const char* name) -> Status {
    if (v <= 0 || v > (int64_t(1) << 32)) {
      return Status::Error(where + ": " + name + " = " + std::to_string(v) + " is out of range");
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  RETURN_IF_ERROR(positive(c.hidden_size, "hidden_size"));
  RETURN_IF_ERROR(positive(c.num_layers, "num_layers"));
  RETURN_IF_ERROR(positive(c.num_heads, "num_heads"));
  RETURN_IF_ERROR(positive(c.num_kv_heads, "num_kv_heads"));
  RETURN_IF_ERROR(positive(c.head_dim, "head_dim"));
  RETURN_IF_ERROR(positive(c.intermediate_size, "intermediate_size"));
  RETURN_IF_ERROR(positive(c.max_position_embeddings, "max_position_embeddings"));
  if (c.num_heads % c.num_kv_heads != 0) {
    return Status::Error(where + ": num_heads " + std::to_string(c.num_heads) +
                         " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
  }
  if (c.rotary_dims <= 0 || c.rotary_dims > c.head_dim || c.rotary_dims % 2 != 0) {
    return Status::Error(where + ": rotary dims " + std::to_string(c.rotary_dims) +
                         " must be even and within head_dim " + std::to_string(c.head_dim));
  }
  return Status::Ok();
}

// ---- GGUF

Expected<ModelConfig> FromGguf(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.arch, f.GetString("general.architecture"));
  if (c.arch != "llama") {
    return Status::Error(f.path() + ": architecture '" + c.arch +
                         "' is not supported from GGUF yet (supported: llama)");
  }
  const std::string p = c.arch + ".";
  ASSIGN_OR_RETURN(c.hidden_size, f.GetI64(p + "embedding_length"));
  ASSIGN_OR_RETURN(c.num_layers, f.GetI64(p + "block_count"));
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
  ASSIGN_OR_RETURN(auto theta, f.FindF32(p + "rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0f);
  // llama.cpp's converter permutes Q/K rows so that rotated pairs are adjacent.
  c.rope_pairing = RopePairing::kInterleaved;

  ASSIGN_OR_RETURN(auto scaling_type, f.FindString(p + "rope.scaling.type"));
  ASSIGN_OR_RETURN(c.rope_scaling.type,
                   RopeTypeFromName(scaling_type.value_or(""), f.path()));
  ASSIGN_OR_RETURN(auto factor, f.FindF32(p + "rope.scaling.factor"));
  c.rope_scaling.factor = factor.value_or(1.0f);
  ASSIGN_OR_RETURN(auto orig, f.FindI64(p + "rope.scaling.original_context_length"));
  c.rope_scaling.original_max_position = double(orig.value_or(c.max_position_embeddings));

  ASSIGN_OR_RETURN(auto vocab, f.FindI64(p + "vocab_size"));
  if (vocab) {
    c.vocab_size = *vocab;
  } else if (const TensorInfo* emb = f.Find("token_embd.weight")) {
    c.vocab_size = emb->shape[0];
  }
  c.tie_word_embeddings = f.Find("output.weight") == nullptr;
  c.attention_bias = f.Find("blk.0.attn_q.bias") != nullptr;
  RETURN_IF_ERROR(ValidateSizes(c, f.path()));
  return c;
}

// ---- HF config.json

template <typename T>
T JsonOr(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

Status ReadHfRope(const json& j, ModelConfig& c, const std::string& where) {
  // v5 writes `rope_parameters` (with rope_theta inside); v4 `rope_theta` + `rope_scaling`.
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  if (auto it = j.find("rope_scaling"); params == nullptr && it != j.end() && it->is_object()) {
    params = &*it;
  }
  c.rope_theta = JsonOr<double>(j, "rope_theta", 10000.0);
  if (params == nullptr) return Status::Ok();
  const json& r = *params;
  c.rope_theta = JsonOr<double>(r, "rope_theta", c.rope_theta);
  std::string type = JsonOr<std::string>(r, "rope_type", JsonOr<std::string>(r, "type", ""));
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
  const double partial = JsonOr<double>(r, "partial_rotary_factor",
                                        JsonOr<double>(j, "partial_rotary_factor", 1.0));
  c.rotary_dims = int64_t(double(c.head_dim) * partial);
  return Status::Ok();
}

}  // namespace

Expected<ModelConfig> ModelConfigFromHf(const HfConfig& hf) {
  const std::string& where = hf.path();
  const json& j = hf.json();
  ModelConfig c;
  try {
    c.arch = JsonOr<std::string>(j, "model_type", "");
    if (c.arch != "llama") {
      return Status::Error(where + ": model_type '" + c.arch +
                           "' is not supported yet (supported: llama)");
    }
    c.vocab_size = JsonOr<int64_t>(j, "vocab_size", 0);
    c.hidden_size = JsonOr<int64_t>(j, "hidden_size", 0);
    c.num_layers = JsonOr<int64_t>(j, "num_hidden_layers", 0);
    c.num_heads = JsonOr<int64_t>(j, "num_attention_heads", 0);
    c.num_kv_heads = JsonOr<int64_t>(j, "num_key_value_heads", c.num_heads);
    c.head_dim = JsonOr<int64_t>(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
    c.intermediate_size = JsonOr<int64_t>(j, "intermediate_size", 0);
    c.max_position_embeddings = JsonOr<int64_t>(j, "max_position_embeddings", 2048);
    c.rms_norm_eps = JsonOr<float>(j, "rms_norm_eps", 1e-6f);
    c.tie_word_embeddings = JsonOr<bool>(j, "tie_word_embeddings", false);
    c.attention_bias = JsonOr<bool>(j, "attention_bias", false);
    c.rotary_dims = c.head_dim;
    c.rope_pairing = RopePairing::kHalfSplit;
    RETURN_IF_ERROR(ReadHfRope(j, c, where));
  } catch (const json::exception& e) {
    return Status::Error(where + ": bad value in config.json: " + e.what());
  }
  RETURN_IF_ERROR(ValidateSizes(c, where));
  return c;
}

Expected<ModelConfig> LoadModelConfig(const ModelFile& file) {
  if (file.format == ModelFormat::kGguf) return FromGguf(*file.gguf);
  return ModelConfigFromHf(*file.hf_config);
}

}  // namespace anymoe
