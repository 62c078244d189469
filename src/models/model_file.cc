#include "models/model_file.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "models/supported_architectures.h"

namespace anymoe {

ModelFile::ModelFile() = default;
ModelFile::~ModelFile() = default;
ModelFile::ModelFile(ModelFile&&) noexcept = default;
ModelFile& ModelFile::operator=(ModelFile&&) noexcept = default;

const TensorSource& ModelFile::tensors() const {
  if (format == ModelFormat::kGguf) return *gguf;
  return *hf_weights;
}

std::vector<const MappedFile*> ModelFile::mapped_files() const {
  if (format == ModelFormat::kGguf) return {&gguf->mapped()};
  std::vector<const MappedFile*> files;
  if (const auto* st = dynamic_cast<const SafetensorsModel*>(hf_weights.get())) {
    for (const SafetensorsShard& shard : st->shards()) files.push_back(shard.file.get());
  }
  return files;
}

Expected<FileLocation> ModelFile::Locate(const uint8_t* p, uint64_t bytes) const {
  const std::vector<const MappedFile*> files = mapped_files();
  for (size_t i = 0; i < files.size(); ++i) {
    const uint8_t* base = files[i]->data();
    if (base != nullptr && p >= base && p - base <= int64_t(files[i]->size()) &&
        bytes <= files[i]->size() - uint64_t(p - base)) {
      return FileLocation{int32_t(i), uint64_t(p - base)};
    }
  }
  return Status::Error(path + ": tensor bytes lie in none of the model's files");
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
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModel> weights, SafetensorsModel::Open(path, fp8));
    const std::string model_type = mf.hf_config->GetString("model_type").value_or("");
    const TextModelWrapper wrapper = TextModelWrapperOf(model_type);
    // A flat text-only checkpoint (GLM-5.3 without text_config) has no wrapper prefix.
    if (!wrapper.weight_prefix.empty() && weights->HasPrefix(wrapper.weight_prefix)) {
      const size_t ignored = weights->KeepPrefixed(wrapper.weight_prefix, wrapper.renamed_prefix,
                                                   wrapper.kept_prefix);
      mf.note = model_type + ": the text model (tensors under '" +
                std::string(wrapper.weight_prefix) + "'); the vision tower and projector (" +
                std::to_string(ignored) + " tensors) are ignored";
    }
    // GLM-5.3-Flash stores an MTP layer after its last layer (eh_proj,
    // shared_head); transformers does not model it and neither does anymoe yet.
    if (model_type == "glm5_next") {
      for (const TensorInfo& t : weights->tensors()) {
        if (t.name.find(".eh_proj.") != std::string::npos ||
            t.name.find(".shared_head.") != std::string::npos) {
          mf.note += std::string(mf.note.empty() ? "" : "; ") +
                     "glm5_next: the MTP layer stored after the last layer is not used "
                     "(its structure is not established; --spec mtp is unavailable)";
          break;
        }
      }
    }
    mf.hf_weights = std::move(weights);
    return mf;
  }
  if (path.ends_with(".safetensors")) {
    return Status::Error(path +
                         ": a bare .safetensors file has no config; pass its folder "
                         "(config.json + safetensors + tokenizer.json)");
  }
  mf.format = ModelFormat::kGguf;
  ASSIGN_OR_RETURN(mf.gguf, GgufFile::Open(path));
  return mf;
}

}  // namespace anymoe
