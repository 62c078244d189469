// A2: safetensors bytes -> SafetensorsModel::Open (header bounds, strict JSON,
// offsets, shapes, tiling), then every tensor's first and last byte read, so
// a tensor placed outside the mapping faults here.
#include <cstdint>

#include "formats/safetensors.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view bytes = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_safetensors");
  const std::string path = anymoe::fuzz::MemoryFile(
      "fuzz.safetensors", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto model = anymoe::SafetensorsModel::Open(path);
  if (!model.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const anymoe::TensorInfo& t : (*model)->tensors()) {
    if (t.bytes == 0) continue;
    const auto* p = static_cast<const uint8_t*>(t.data);
    sink = sink ^ p[0] ^ p[t.bytes - 1];
    (void)(*model)->Find(t.name);
  }
  for (const anymoe::SafetensorsShard& s : (*model)->shards()) {
    for (const auto& [k, v] : s.metadata) sink = sink ^ uint8_t(k.size() + v.size());
  }
  return 0;
}
