#include "models/model_file.h"

#include <filesystem>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

namespace anymoe {

ModelFile::ModelFile() = default;
ModelFile::~ModelFile() = default;
ModelFile::ModelFile(ModelFile&&) noexcept = default;
ModelFile& ModelFile::operator=(ModelFile&&) noexcept = default;

const TensorSource& ModelFile::tensors() const {
  if (format == ModelFormat::kGguf) return *gguf;
  return *hf_weights;
}

Expected<ModelFile> OpenModelFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::Error(path + ": no such file or directory");
  ModelFile mf;
  mf.path = path;
  if (fs::is_directory(st)) {
    const std::string config = (fs::path(path) / "config.json").string();
    if (!fs::exists(config)) {
      return Status::Error(path + ": folder has no config.json (expected an HF model folder)");
    }
    mf.format = ModelFormat::kHfFolder;
    ASSIGN_OR_RETURN(mf.hf_config, HfConfig::Load(config));
    ASSIGN_OR_RETURN(const Fp8Quantization fp8, ReadFp8Quantization(*mf.hf_config));
    ASSIGN_OR_RETURN(mf.hf_weights, SafetensorsModel::Open(path, fp8));
    return mf;
  }
  if (path.ends_with(".safetensors")) {
    return Status::Error(path + ": a bare .safetensors file has no config; pass its folder "
                                "(config.json + safetensors + tokenizer.json)");
  }
  mf.format = ModelFormat::kGguf;
  ASSIGN_OR_RETURN(mf.gguf, GgufFile::Open(path));
  return mf;
}

}  // namespace anymoe
