// GGUF (version 3) writer: metadata copied from a file or set, and tensors
// whose bytes come in pieces from elsewhere (another file's mapping), written
// in one pass to PATH.tmp and renamed over PATH, so that no reader ever sees
// half a file. `anymoe prune` writes pruned models with it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "formats/gguf.h"

namespace anymoe {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  // Metadata, in the order added; a key added twice keeps its first place
  // and its last value.
  void CopyValue(std::string_view key, const GgufValue& value);
  void SetU32(std::string_view key, uint32_t value);

  // A tensor of `shape` (outer-first, as TensorInfo) whose bytes are the
  // concatenation of `pieces`, which must stay valid until Write returns.
  // Writes fail unless the pieces add up to the bytes of `dtype` x `shape`.
  void AddTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                 std::vector<std::span<const uint8_t>> pieces);

  Status Write(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  // type id, then the value
  };
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::span<const uint8_t>> pieces;
  };
  void Put(std::string_view key, std::vector<uint8_t> encoded);

  uint64_t alignment_;
  std::vector<Entry> kvs_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace anymoe
