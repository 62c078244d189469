// Picks the config reader for a model file's format.
#include "models/config_loader.h"

namespace anymoe {

Expected<ModelConfig> LoadModelConfig(const ModelFile& file) {
  if (file.format == ModelFormat::kGguf) return ModelConfigFromGguf(*file.gguf);
  return ModelConfigFromHf(*file.hf_config);
}

}  // namespace anymoe
