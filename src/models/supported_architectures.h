// The architectures anymoe runs, in one table: the HF `model_type` each is
// read from, the GGUF `general.architecture` llama.cpp's converter writes for
// it, and what it is. Config readers name them in their errors; `info` and
// `doctor` list them.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace anymoe {

struct SupportedArchitecture {
  std::string_view hf_model_type;  // config.json "model_type"
  std::string_view gguf_arch;      // GGUF general.architecture ("" when none)
  std::string_view description;
};

std::span<const SupportedArchitecture> SupportedArchitectures();
// "llama, qwen3_moe, ..." and "llama, glm4moe, ...": for error messages.
std::string SupportedHfModelTypes();
std::string SupportedGgufArchitectures();

// Multimodal wrappers whose text model anymoe runs: the key of the text
// config in config.json and the tensor-name prefix of the language model
// (Kimi K2.5: "text_config", "language_model."); empty for other model types.
// Tensors under `weight_prefix` are kept with it replaced by `renamed_prefix`,
// those under `kept_prefix` (a head outside the language model) unchanged;
// the rest (vision tower, projector) are dropped.
struct TextModelWrapper {
  std::string_view text_config_key;
  std::string_view weight_prefix;
  std::string_view renamed_prefix = "";
  std::string_view kept_prefix = "";
};
TextModelWrapper TextModelWrapperOf(std::string_view hf_model_type);

}  // namespace anymoe
