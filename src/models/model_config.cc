#include "models/model_config.h"

#include <sstream>

namespace anymoe {

std::string RopeScalingName(RopeScaling::Type t) {
  switch (t) {
    case RopeScaling::Type::kNone: return "none";
    case RopeScaling::Type::kLinear: return "linear";
    case RopeScaling::Type::kLlama3: return "llama3";
    case RopeScaling::Type::kYarn: return "yarn";
    case RopeScaling::Type::kDynamic: return "dynamic";
  }
  return "?";
}

std::string ModelConfig::Summary() const {
  std::ostringstream s;
  s << arch << ": " << num_layers << " layers, hidden " << hidden_size << ", heads " << num_heads
    << "/" << num_kv_heads << " x " << head_dim << ", ffn " << intermediate_size << ", vocab "
    << vocab_size << ", rope theta " << rope_theta << " ("
    << RopeScalingName(rope_scaling.type) << ")";
  return s.str();
}

}  // namespace anymoe
