// Opens whatever `-m` names: a GGUF file, or an HF model folder (config.json +
// safetensors, sharded or not). Keeps the file objects alive for the model's
// lifetime, since weights are used in place from their mmaps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/tensor_source.h"

namespace anymoe {

class GgufFile;
class HfConfig;
class MappedFile;

// Where bytes of a tensor lie on disk: the file (an index into
// ModelFile::mapped_files()) and the offset in it.
struct FileLocation {
  int32_t file = 0;
  uint64_t offset = 0;
};

enum class ModelFormat { kGguf, kHfFolder };

struct ModelFile {
  ModelFormat format;
  std::string path;
  std::unique_ptr<GgufFile> gguf;            // kGguf
  std::unique_ptr<HfConfig> hf_config;       // kHfFolder
  std::unique_ptr<TensorSource> hf_weights;  // kHfFolder
  // A one-line note for the user about what of the file is used ("kimi_k25:
  // the text model; 27 vision tensors ignored"); empty for most files.
  std::string note;

  ModelFile();
  ~ModelFile();
  ModelFile(ModelFile&&) noexcept;
  ModelFile& operator=(ModelFile&&) noexcept;

  const TensorSource& tensors() const;
  // The mapped files tensor data points into (one GGUF, or the safetensors shards).
  std::vector<const MappedFile*> mapped_files() const;
  // The file and offset of `bytes` bytes at `p`, which must lie inside one of them.
  Expected<FileLocation> Locate(const uint8_t* p, uint64_t bytes) const;
  // Folder of an HF model (for tokenizer.json and friends); empty for GGUF.
  std::string hf_folder() const { return format == ModelFormat::kHfFolder ? path : ""; }
};

Expected<ModelFile> OpenModelFile(const std::string& path);

}  // namespace anymoe
