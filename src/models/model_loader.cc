// Maps an architecture name to the model class that runs it.
#include "models/config_loader.h"
#include "models/llama.h"
#include "models/model.h"

namespace anymoe {

Expected<std::unique_ptr<Model>> LoadModel(const ModelFile& file, Backend& backend,
                                           const LoadOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(file));
  if (config.arch == "llama") return LlamaModel::Load(file, std::move(config), backend, options);
  return Status::Error(file.path + ": no forward pass for architecture '" + config.arch + "'");
}

}  // namespace anymoe
