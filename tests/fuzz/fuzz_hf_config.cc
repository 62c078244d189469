// A3: config.json text -> HfConfig::Parse -> ModelConfigFromHf (architecture,
// sizes, MoE routing, MLA/DSA, RoPE scaling): inconsistent configs must be
// rejected with a message, never crash or overflow.
#include <cstdint>
#include <string_view>

#include "formats/hf_config.h"
#include "fuzz_input.h"
#include "models/config_loader.h"
#include "models/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string storage;
  const std::string_view text = anymoe::fuzz::ExpandInput(data, size, 1 << 20, &storage);
  const anymoe::fuzz::CpuBudget budget("fuzz_hf_config");
  auto config = anymoe::HfConfig::Parse(text, "config.json");
  if (!config.ok()) return 0;
  const anymoe::HfConfig& c = **config;
  (void)c.GetInt("hidden_size");
  (void)c.GetDouble("rope_scaling.factor");
  (void)c.GetString("text_config.model_type");
  (void)c.GetBool("tie_word_embeddings", false);
  (void)anymoe::ModelConfigFromHf(c);
  return 0;
}
