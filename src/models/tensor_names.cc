#include "models/tensor_names.h"

#include <utility>

namespace anymoe {
namespace {

// HF layer-relative module path -> llama.cpp name (same .weight/.bias suffix).
constexpr std::pair<std::string_view, std::string_view> kLayerRules[] = {
    {"input_layernorm", "attn_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"self_attn.q_a_proj", "attn_q_a"},
    {"self_attn.q_a_layernorm", "attn_q_a_norm"},
    {"self_attn.q_b_proj", "attn_q_b"},
    {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
    {"self_attn.kv_a_layernorm", "attn_kv_a_norm"},
    {"self_attn.kv_b_proj", "attn_kv_b"},
    {"self_attn.indexer.wq_b", "indexer.attn_q_b"},
    {"self_attn.indexer.wk", "indexer.attn_k"},
    {"self_attn.indexer.k_norm", "indexer.k_norm"},
    {"self_attn.indexer.weights_proj", "indexer.proj"},
    // glm5-next's KDA layers (llama.cpp's kimi-linear names).
    {"self_attn.q_conv1d", "ssm_conv1d_q"},
    {"self_attn.k_conv1d", "ssm_conv1d_k"},
    {"self_attn.v_conv1d", "ssm_conv1d_v"},
    {"self_attn.f_a_proj", "ssm_f_a"},
    {"self_attn.f_b_proj", "ssm_f_b"},
    {"self_attn.b_proj", "ssm_beta"},
    {"self_attn.g_a_proj", "ssm_g_a"},
    {"self_attn.g_b_proj", "ssm_g_b"},
    {"self_attn.o_norm", "ssm_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.gate", "ffn_gate_inp"},
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
    {"mlp.experts.gate_proj", "ffn_gate_exps"},  // stacked [E, ...] in GGUF
    {"mlp.experts.up_proj", "ffn_up_exps"},
    {"mlp.experts.down_proj", "ffn_down_exps"},
    {"block_sparse_moe.gate", "ffn_gate_inp"},  // Mixtral
    {"block_sparse_moe.experts.gate_proj", "ffn_gate_exps"},
    {"block_sparse_moe.experts.up_proj", "ffn_up_exps"},
    {"block_sparse_moe.experts.down_proj", "ffn_down_exps"},
    // The NextN / MTP layer's own tensors (layer index num_layers).
    {"eh_proj", "nextn.eh_proj"},
    {"enorm", "nextn.enorm"},
    {"hnorm", "nextn.hnorm"},
    {"shared_head.norm", "nextn.shared_head_norm"},
    {"shared_head.head", "nextn.shared_head_head"},
    {"embed_tokens", "nextn.embed_tokens"},
};

// HF layer parameters without a .weight/.bias suffix -> the GGUF name's tail.
// The selection bias is a parameter of the gate module in HF, its own tensor in
// GGUF; dt_bias is llama.cpp's ssm_dt.bias; the rest are glm5-next's own
// (tools/gen_glm5_next_gguf.py; A_log kept as stored, not llama.cpp's -exp(A_log)).
constexpr std::pair<std::string_view, std::string_view> kParameterRules[] = {
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"self_attn.dt_bias", "ssm_dt.bias"},
    {"self_attn.A_log", "ssm_a_log"},
    {"self_attn.indexer.index_kpool_compress_ape", "indexer.kpool_ape"},
    {"self_attn.indexer.index_kpool_compress_gate", "indexer.kpool_gate"},
    {"hc_attn_fn", "hc_attn_fn"},
    {"hc_attn_base", "hc_attn_base"},
    {"hc_attn_scale", "hc_attn_scale"},
    {"hc_ffn_fn", "hc_ffn_fn"},
    {"hc_ffn_base", "hc_ffn_base"},
    {"hc_ffn_scale", "hc_ffn_scale"},
};

constexpr std::pair<std::string_view, std::string_view> kGlobalRules[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

}  // namespace

std::string LayerTensorName(int64_t layer, std::string_view suffix) {
  return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

std::string GgufTensorName(std::string_view gguf_arch, std::string_view name) {
  for (const auto& [hf, gguf] : kGlobalRules) {
    if (name == hf) return std::string(gguf);
  }
  constexpr std::string_view kPrefix = "model.layers.";
  if (!name.starts_with(kPrefix)) return std::string(name);
  const size_t dot = name.find('.', kPrefix.size());
  if (dot == std::string_view::npos) return std::string(name);
  const std::string_view layer = name.substr(kPrefix.size(), dot - kPrefix.size());
  std::string_view rest = name.substr(dot + 1);
  for (const auto& [hf, gguf] : kParameterRules) {
    if (rest == hf) return "blk." + std::string(layer) + "." + std::string(gguf);
  }
  const size_t last = rest.rfind('.');
  if (last == std::string_view::npos) return std::string(name);
  const std::string_view module = rest.substr(0, last), suffix = rest.substr(last);
  // GLM-4.5 files name the pre-FFN norm after HF's module, not `ffn_norm`.
  if (gguf_arch == "glm4moe" && module == "post_attention_layernorm") {
    return "blk." + std::string(layer) + ".post_attention_norm" + std::string(suffix);
  }
  for (const auto& [hf, gguf] : kLayerRules) {
    if (module == hf) return "blk." + std::string(layer) + "." + std::string(gguf) + std::string(suffix);
  }
  return std::string(name);
}

}  // namespace anymoe
