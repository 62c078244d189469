// A3: tokenizer.json bytes -> Tokenizer::FromHfJson (the streamed vocabulary,
// merges and added tokens, id density, token and count limits, merges naming
// unknown tokens), then an encode and decode with whatever loaded. Inputs may
// be expansion recipes (fuzz_input.h), up to 1 MiB.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view bytes = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_tokenizer_json");
  const std::string path = anymoe::fuzz::MemoryFile(
      "tokenizer.json", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto tokenizer = anymoe::Tokenizer::FromHfJson(path, "");
  if (!tokenizer.ok()) return 0;
  const std::vector<int32_t> ids =
      (*tokenizer)->Encode("Hello <|im_end|> world 123 \xff", true, true);
  (void)(*tokenizer)->Decode(ids);
  return 0;
}
