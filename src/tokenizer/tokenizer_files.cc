// TokenizerFromFolder / TokenizerFromPath: which file of a model holds its
// tokenizer. Only the metadata of a GGUF is read (the file is mapped, its
// tensors are never touched), so vocabulary-only files load as well.
#include "tokenizer/tokenizer_files.h"

#include <filesystem>

#include "formats/gguf.h"

namespace anymoe {

Expected<std::unique_ptr<Tokenizer>> TokenizerFromFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string json = (fs::path(dir) / "tokenizer.json").string();
  if (!fs::exists(json)) {
    // Kimi K2 / K2.5 ship tiktoken.model (and tokenization_kimi.py) instead.
    if (fs::exists(fs::path(dir) / "tiktoken.model")) return Tokenizer::FromTiktokenFolder(dir);
    return Status::Error(dir + ": folder has neither tokenizer.json nor tiktoken.model");
  }
  const std::string config = (fs::path(dir) / "tokenizer_config.json").string();
  return Tokenizer::FromHfJson(json, fs::exists(config) ? config : "");
}

Expected<std::unique_ptr<Tokenizer>> TokenizerFromPath(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return TokenizerFromFolder(path);
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  return Tokenizer::FromGguf(*gguf);
}

}  // namespace anymoe
