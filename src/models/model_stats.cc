#include "models/model_stats.h"

namespace anymoe {

ParameterCounts CountParameters(const ModelConfig& config, const TensorSource& tensors) {
  ParameterCounts c;
  for (const TensorInfo& t : tensors.tensors()) c.total += t.elements();
  c.active = c.total;
  return c;
}

std::map<std::string, DTypeUsage> SummarizeDTypes(const TensorSource& tensors) {
  std::map<std::string, DTypeUsage> out;
  for (const TensorInfo& t : tensors.tensors()) {
    DTypeUsage& u = out[std::string(Name(t.dtype))];
    ++u.tensors;
    u.elements += t.elements();
    u.bytes += t.bytes;
  }
  return out;
}

uint64_t KvBytesPerToken(const ModelConfig& c) {
  return uint64_t(c.num_layers) * c.num_kv_heads * c.head_dim * 2 * sizeof(float);
}

uint64_t ActivationBytes(const ModelConfig& c, int64_t t) {
  const int64_t per_token = 2 * c.hidden_size + 2 * c.num_heads * c.head_dim +
                            2 * c.num_kv_heads * c.head_dim + 2 * c.intermediate_size +
                            c.vocab_size;
  return uint64_t(t) * per_token * sizeof(float);
}

}  // namespace anymoe
