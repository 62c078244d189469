#include "models/supported_architectures.h"

#include <algorithm>
#include <vector>

namespace anymoe {
namespace {

// Mixtral's GGUF is `llama` with experts; Kimi K2.5's text model converts to
// `deepseek2` (llama.cpp registers KimiK25ForConditionalGeneration there).
constexpr SupportedArchitecture kArchitectures[] = {
    {"llama", "llama", "dense llama-style (SmolLM2, Llama)"},
    {"qwen3_moe", "qwen3moe", "Qwen3-MoE"},
    {"mixtral", "llama", "Mixtral (llama with experts)"},
    {"glm4_moe", "glm4moe", "GLM-4.5 / 4.6 / 4.7"},
    {"deepseek_v3", "deepseek2", "DeepSeek-V3 (MLA + group-limited MoE)"},
    {"glm4_moe_lite", "deepseek2", "GLM-4.7-Flash (MLA)"},
    {"glm_moe_dsa", "glm-dsa", "GLM-5 (MLA + DSA indexer, shared indexer layers)"},
    {"deepseek_v32", "deepseek32", "DeepSeek-V3.2 (DeepSeek-V3 + DSA indexer in every layer)"},
    {"kimi_k25", "deepseek2", "Kimi K2.5 text model (DeepSeek-V3 in a vision wrapper)"},
    {"glm5_next", "glm5-next", "GLM-5.3-Flash text model (KDA + NoPE MLA with KPool DSA, mHC)"},
};

// The distinct non-empty values of one field, in table order, comma-separated.
std::string Join(std::string_view SupportedArchitecture::*field) {
  std::vector<std::string_view> seen;
  std::string out;
  for (const SupportedArchitecture& a : kArchitectures) {
    const std::string_view name = a.*field;
    if (name.empty() || std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

std::span<const SupportedArchitecture> SupportedArchitectures() { return kArchitectures; }

std::string SupportedHfModelTypes() { return Join(&SupportedArchitecture::hf_model_type); }

std::string SupportedGgufArchitectures() { return Join(&SupportedArchitecture::gguf_arch); }

TextModelWrapper TextModelWrapperOf(std::string_view hf_model_type) {
  if (hf_model_type == "kimi_k25") return {"text_config", "language_model."};
  // Glm5NextForConditionalGeneration: model.language_model.* beside model.visual.*, lm_head outside.
  if (hf_model_type == "glm5_next") {
    return {"text_config", "model.language_model.", "model.", "lm_head."};
  }
  return {};
}

}  // namespace anymoe
