// Hugging Face safetensors weights: one file, or a folder of shards named by a
// model.safetensors.index.json. Each shard is mmapped and validated as the
// reference implementation does (reliability.md §1.4); the tensors of all shards
// are merged into one name index and used in place.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "formats/fp8_scales.h"
#include "formats/tensor_source.h"

namespace anymoe {

struct SafetensorsShard {
  std::unique_ptr<MappedFile> file;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

class SafetensorsModel : public TensorSource {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference reader
  static constexpr uint64_t kMaxIndexBytes = 100'000'000;

  // `path` is a .safetensors file, a model.safetensors.index.json, or a folder
  // holding model.safetensors.index.json (preferred) or model.safetensors.
  // Supported dtypes: F32, F16, BF16, I32, and F8_E4M3 / F8_E5M2 weights with
  // the block scales `quantization` describes (fp8_scales.h); any other dtype is
  // an error naming the tensor. Errors are one line naming the file and the
  // tensor or key at fault.
  static Expected<std::unique_ptr<SafetensorsModel>> Open(const std::string& path,
                                                          const Fp8Quantization& quantization = {});

  // TensorSource. Data pointers are into the mmaps and carry no alignment
  // promise beyond 1 byte (safetensors does not align tensors).
  const TensorInfo* Find(std::string_view name) const override;
  std::span<const TensorInfo> tensors() const override { return tensors_; }
  std::string description() const override { return description_; }

  std::span<const SafetensorsShard> shards() const { return shards_; }
  // Keeps only the tensors named `prefix` + X, renamed `renamed` + X, and
  // those starting with `kept` (when not empty) as they are: a multimodal
  // wrapper's language model (Kimi K2.5's "language_model."; GLM-5.3's
  // "model.language_model." -> "model." beside "lm_head."). Returns how many
  // other tensors were dropped; the shards stay mapped.
  size_t KeepPrefixed(std::string_view prefix, std::string_view renamed = "",
                      std::string_view kept = "");
  // Whether any tensor's name starts with `prefix`.
  bool HasPrefix(std::string_view prefix) const;
  // Index into shards() of the shard holding `t` (one of tensors()).
  size_t ShardOf(const TensorInfo& t) const { return shard_of_[&t - tensors_.data()]; }

 private:
  SafetensorsModel() = default;
  Status AddShard(const std::string& path);
  Status OpenIndex(const std::string& index_path);

  std::string description_;
  std::vector<SafetensorsShard> shards_;
  std::vector<TensorInfo> tensors_;  // grouped by shard, in file order within one
  std::vector<size_t> shard_of_;     // parallel to tensors_
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace anymoe
