// RoPE frequency tables exactly as transformers computes them (f32 arithmetic):
// default, linear, llama3, YaRN (with its attention factor) and dynamic NTK.
#pragma once

#include <vector>

#include "models/model_config.h"

namespace anymoe {

struct RopeFrequencies {
  std::vector<float> inv_freq;    // [rotary_dims / 2]
  float attention_factor = 1.0f;  // multiplies cos and sin
};

// `seq_len` only matters for dynamic NTK scaling (the length being processed).
RopeFrequencies ComputeRopeFrequencies(double theta, int64_t rotary_dims,
                                       const RopeScaling& scaling, int64_t max_position,
                                       int64_t seq_len = 0);

// YaRN's m(s, mscale) = 0.1 * mscale * ln(s) + 1 for s > 1, else 1.
double YarnMscale(double scale, double mscale);

}  // namespace anymoe
