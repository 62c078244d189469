// Figures about a model that need no backend: parameter counts, the memory its
// KV cache and activations take. `anymoe info` prints them; the loader uses the
// same formulas to size its buffers.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "formats/tensor_source.h"
#include "models/model_config.h"

namespace anymoe {

struct ParameterCounts {
  int64_t total = 0;
  int64_t active = 0;  // touched per token (all of them for a dense model)
};
ParameterCounts CountParameters(const ModelConfig& config, const TensorSource& tensors);

struct DTypeUsage {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};
std::map<std::string, DTypeUsage> SummarizeDTypes(const TensorSource& tensors);

uint64_t KvBytesPerToken(const ModelConfig& config);  // f32 K and V, all layers
uint64_t ActivationBytes(const ModelConfig& config, int64_t max_step_tokens);

}  // namespace anymoe
