#include "models/model_fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>

#include "formats/gguf.h"

namespace anymoe {
namespace {

// Bytes of each tensor's start that enter the hash: enough to tell weights
// apart, one page at most to read.
constexpr uint64_t kTensorPrefixBytes = 256;

class Fnv1a64 {
 public:
  void Add(std::span<const uint8_t> bytes) {
    for (uint8_t b : bytes) hash_ = (hash_ ^ b) * 0x100000001b3ull;
  }
  void Add(const std::string& s) {
    Add(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
    Add(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("\0"), 1));
  }
  void Add(int64_t v) { Add(std::span(reinterpret_cast<const uint8_t*>(&v), sizeof(v))); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

std::string ModelFingerprint(const ModelFile& file) {
  Fnv1a64 h;
  if (file.gguf) {
    const MappedFile& m = file.gguf->mapped();
    h.Add(std::span(m.data(), std::min<uint64_t>(file.gguf->data_offset(), m.size())));
  }
  for (const TensorInfo& t : file.tensors().tensors()) {
    h.Add(t.name);
    h.Add(int64_t(t.dtype));
    for (int64_t d : t.shape) h.Add(d);
    h.Add(std::span(t.data, size_t(std::min(t.bytes, kTensorPrefixBytes))));
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)h.value());
  return hex;
}

}  // namespace anymoe
