// GGUF (versions 2 and 3, little-endian) reader: metadata key/values and tensor
// descriptors over a read-only mmap, with tensor data used in place. The file is
// hostile input: every count, length, offset and size is validated against the
// bytes that remain and against absolute caps before anything is allocated.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "formats/tensor_source.h"

namespace anymoe {

// Value type ids as stored in the file.
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view GgufTypeName(GgufType t);  // "u32", "string", "array", ...

// One metadata value. Strings and numeric arrays stay in the mmap (a string is
// a view of its bytes there), so a GgufValue is only valid while the GgufFile
// that produced it lives, and reading a file's metadata costs a fixed amount
// of memory per value whatever its length (a 64 MiB string: 16 bytes).
class GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }
  GgufType element_type() const { return element_type_; }  // arrays only
  uint64_t array_size() const { return array_size_; }      // arrays only

  // Scalars; nullopt when the type does not match or the value does not fit.
  // Integers of any width and signedness convert when the value fits.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUInt() const;
  std::optional<double> AsDouble() const;  // f32 and f64 only
  std::optional<bool> AsBool() const;
  std::optional<std::string_view> AsString() const;  // nullopt unless a string

  // Array elements (i < array_size()); same conversion rules as the scalars.
  std::span<const std::string_view> strings() const { return strings_; }  // string arrays
  std::optional<int64_t> IntAt(uint64_t i) const;
  std::optional<double> DoubleAt(uint64_t i) const;
  std::optional<bool> BoolAt(uint64_t i) const;  // bool arrays only

  // Short human-readable rendering, e.g. `[1, 2, 3, ... (32000 items)]`.
  std::string ToString(size_t max_elements = 8) const;
  // Appends the value as a GGUF file stores it after its type id (an array:
  // element type, count, elements), for a writer copying it (formats/gguf_writer.h).
  void AppendEncoded(std::vector<uint8_t>& out) const;

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::kU8;
  GgufType element_type_ = GgufType::kU8;
  uint64_t raw_ = 0;  // scalar bits, zero-extended from the file's width
  std::string_view string_;              // in the mmap
  const uint8_t* array_data_ = nullptr;  // numeric arrays: packed LE elements in the mmap
  uint64_t array_size_ = 0;
  std::vector<std::string_view> strings_;  // string arrays, in the mmap
};

struct GgufKeyValue {
  std::string_view key;  // in the mmap
  GgufValue value;
};

class GgufFile : public TensorSource {
 public:
  // Maps and validates `path`. Errors are one line naming the file and the key or
  // tensor at fault.
  static Expected<std::unique_ptr<GgufFile>> Open(const std::string& path);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of tensor data
  const std::string& path() const { return file_->path(); }
  // The mapping tensor data points into (expert streaming reads it by offset).
  const MappedFile& mapped() const { return *file_; }

  // Metadata in file order, and lookup by key (nullptr when absent).
  const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
  const GgufValue* FindValue(std::string_view key) const;

  // Typed getters: an error names the file and key when the key is missing, has
  // another type, or does not fit. Integer getters accept any integer type whose
  // value fits; GetF32 accepts f32 and f64.
  Expected<std::string> GetString(std::string_view key) const;
  Expected<uint32_t> GetU32(std::string_view key) const;
  Expected<uint64_t> GetU64(std::string_view key) const;
  Expected<int64_t> GetI64(std::string_view key) const;
  Expected<float> GetF32(std::string_view key) const;
  Expected<bool> GetBool(std::string_view key) const;
  // Optional keys: nullopt when absent, an error only when present but invalid.
  Expected<std::optional<std::string>> FindString(std::string_view key) const;
  Expected<std::optional<uint32_t>> FindU32(std::string_view key) const;
  Expected<std::optional<uint64_t>> FindU64(std::string_view key) const;
  Expected<std::optional<int64_t>> FindI64(std::string_view key) const;
  Expected<std::optional<float>> FindF32(std::string_view key) const;
  Expected<std::optional<bool>> FindBool(std::string_view key) const;

  // Arrays. The strings are views into this file's mapping.
  Expected<std::span<const std::string_view>> GetStringArray(std::string_view key) const;
  Expected<std::vector<float>> GetF32Array(std::string_view key) const;    // f32/f64 elements
  Expected<std::vector<int32_t>> GetI32Array(std::string_view key) const;  // fitting ints

  // TensorSource. Tensor data pointers are into the mmap and aligned only to
  // alignment() relative to the file start; shapes are outer-first (ne reversed).
  const TensorInfo* Find(std::string_view name) const override;
  std::span<const TensorInfo> tensors() const override { return tensors_; }
  std::string description() const override { return path(); }

 private:
  friend class GgufParser;
  GgufFile() = default;
  Status KeyError(std::string_view key, const std::string& what) const;
  Expected<const GgufValue*> Require(std::string_view key) const;
  template <typename T>
  Expected<std::optional<T>> FindAs(std::string_view key,
                                    std::optional<T> (*convert)(const GgufValue&),
                                    std::string_view expected) const;
  template <typename T>
  Expected<T> GetAs(std::string_view key, std::optional<T> (*convert)(const GgufValue&),
                    std::string_view expected) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kvs_;
  std::map<std::string_view, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace anymoe
