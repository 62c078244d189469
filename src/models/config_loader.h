// Reads a ModelConfig from GGUF metadata (`<arch>.*` keys) or an HF config.json
// (v4 `rope_scaling` and v5 `rope_parameters` spellings), validating every size.
#pragma once

#include "models/model_config.h"
#include "models/model_file.h"

namespace anymoe {

class GgufFile;
class HfConfig;

Expected<ModelConfig> LoadModelConfig(const ModelFile& file);
Expected<ModelConfig> ModelConfigFromHf(const HfConfig& config);
Expected<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

}  // namespace anymoe
