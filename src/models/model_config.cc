#include "models/model_config.h"

#include <cmath>
#include <sstream>

#include "models/rope.h"

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

int64_t ModelConfig::num_moe_layers() const {
  int64_t n = 0;
  for (FfnKind k : ffn_kinds) n += k == FfnKind::kMoe;
  return n;
}

float ModelConfig::AttentionScale() const {
  if (attention == AttentionKind::kGqa) return 1.0f / std::sqrt(float(head_dim));
  double scale = 1.0 / std::sqrt(double(mla.qk_nope_head_dim + mla.qk_rope_head_dim));
  // DeepSeek's YaRN also sharpens the softmax, by m(factor, mscale_all_dim)^2.
  if (rope_scaling.type == RopeScaling::Type::kYarn && rope_scaling.mscale_all_dim != 0) {
    const double m = YarnMscale(rope_scaling.factor, rope_scaling.mscale_all_dim);
    scale *= m * m;
  }
  return float(scale);
}

std::string ModelConfig::Summary() const {
  std::ostringstream s;
  s << arch << ": " << num_layers << " layers, hidden " << hidden_size << ", heads " << num_heads
    << "/" << num_kv_heads << " x " << head_dim << ", ffn " << intermediate_size << ", vocab "
    << vocab_size << ", rope theta " << rope_theta << " ("
    << RopeScalingName(rope_scaling.type) << ")";
  if (is_moe()) {
    s << ", " << moe.num_experts << " experts top-" << moe.experts_per_token << " in "
      << num_moe_layers() << " layers";
  }
  return s.str();
}

}  // namespace anymoe
