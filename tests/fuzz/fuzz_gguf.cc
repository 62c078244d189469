// A1: GGUF bytes -> GgufFile::Open, then everything a load does with the
// metadata before touching weights: every value rendered and read through the
// typed getters, the model config, the tokenizer, and one row of each tensor
// dequantised (so a tensor placed outside the mapping faults here).
#include <cstdint>
#include <vector>

#include "formats/gguf.h"
#include "fuzz_input.h"
#include "models/config_loader.h"
#include "tokenizer/tokenizer.h"

namespace {

using anymoe::GgufFile;

void ReadAllMetadata(const GgufFile& f) {
  for (const anymoe::GgufKeyValue& kv : f.metadata()) {
    (void)kv.value.ToString();
    (void)f.FindU32(kv.key);
    (void)f.FindI64(kv.key);
    (void)f.FindF32(kv.key);
    (void)f.FindString(kv.key);
    if (kv.value.is_array() && kv.value.array_size() <= 4096) {
      (void)f.GetI32Array(kv.key);
      (void)f.GetF32Array(kv.key);
    }
  }
}

void TouchTensors(const GgufFile& f) {
  std::vector<float> row;
  for (const anymoe::TensorInfo& t : f.tensors()) {
    const int64_t n = t.shape.back();  // one row, innermost dimension
    if (n > (1 << 16)) continue;      // keep iterations fast
    row.resize(size_t(n));
    anymoe::DequantizeRow(t.dtype, t.data, row.data(), n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view bytes = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_gguf");
  const std::string path = anymoe::fuzz::MemoryFile(
      "fuzz.gguf", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto file = GgufFile::Open(path);
  if (!file.ok()) return 0;
  const GgufFile& f = **file;
  ReadAllMetadata(f);
  TouchTensors(f);
  (void)anymoe::ModelConfigFromGguf(f);
  auto tokenizer = anymoe::Tokenizer::FromGguf(f);
  if (tokenizer.ok()) {
    const std::vector<int32_t> ids = (*tokenizer)->Encode("Hello <|im_end|> world 123", true, true);
    (void)(*tokenizer)->Decode(ids);
  }
  return 0;
}
