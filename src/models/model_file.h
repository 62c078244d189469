// Opens whatever `-m` names: a GGUF file, or an HF model folder (config.json +
// safetensors, sharded or not). Keeps the file objects alive for the model's
// lifetime, since weights are used in place from their mmaps.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "formats/tensor_source.h"

namespace anymoe {

class GgufFile;
class HfConfig;

enum class ModelFormat { kGguf, kHfFolder };

struct ModelFile {
  ModelFormat format;
  std::string path;
  std::unique_ptr<GgufFile> gguf;          // kGguf
  std::unique_ptr<HfConfig> hf_config;     // kHfFolder
  std::unique_ptr<TensorSource> hf_weights;  // kHfFolder

  ModelFile();
  ~ModelFile();
  ModelFile(ModelFile&&) noexcept;
  ModelFile& operator=(ModelFile&&) noexcept;

  const TensorSource& tensors() const;
  // Folder of an HF model (for tokenizer.json and friends); empty for GGUF.
  std::string hf_folder() const { return format == ModelFormat::kHfFolder ? path : ""; }
};

Expected<ModelFile> OpenModelFile(const std::string& path);

}  // namespace anymoe
