#include "models/config_loader.h"

#include "formats/gguf.h"
#include "models/config_validation.h"

namespace anymoe {
namespace {

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
  c.ffn_kinds.assign(size_t(c.num_layers), FfnKind::kDense);
  c.attention_bias = f.Find("blk.0.attn_q.bias") != nullptr;
  RETURN_IF_ERROR(ValidateConfig(c, f.path()));
  return c;
}

}  // namespace

Expected<ModelConfig> LoadModelConfig(const ModelFile& file) {
  if (file.format == ModelFormat::kGguf) return FromGguf(*file.gguf);
  return ModelConfigFromHf(*file.hf_config);
}

}  // namespace anymoe
