// The architecture-neutral description of a model: sizes, norms, RoPE, and how
// its weights are laid out. Filled from GGUF metadata or an HF config.json, so
// the forward code never looks at file formats.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace anymoe {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn, kDynamic };
  Type type = Type::kNone;
  double factor = 1.0;
  double original_max_position = 0;  // original_max_position_embeddings
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0: absent
  double mscale_all_dim = 0.0;  // 0: absent
  double attention_factor = 0.0;  // 0: derive
  bool truncate = true;
};

std::string RopeScalingName(RopeScaling::Type t);

struct ModelConfig {
  std::string arch;  // "llama"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;

  double rope_theta = 10000.0;
  int64_t rotary_dims = 0;  // leading dims of a head that rotate (= head_dim unless partial)
  RopePairing rope_pairing = RopePairing::kHalfSplit;
  RopeScaling rope_scaling;

  bool tie_word_embeddings = false;
  bool attention_bias = false;

  std::string Summary() const;  // one line for logs
};

}  // namespace anymoe
