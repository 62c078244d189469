#include "models/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace anymoe {
namespace {

std::vector<float> DefaultInvFreq(double theta, int64_t dims) {
  // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), all in f32.
  std::vector<float> inv(size_t(dims / 2));
  const float base = float(theta);
  for (int64_t i = 0; i < dims / 2; ++i) {
    const float exponent = float(2 * i) / float(dims);
    inv[size_t(i)] = 1.0f / std::pow(base, exponent);
  }
  return inv;
}

void ApplyLlama3(const RopeScaling& s, std::vector<float>& inv) {
  const double old_ctx = s.original_max_position;
  const double low_wavelen = old_ctx / s.low_freq_factor;
  const double high_wavelen = old_ctx / s.high_freq_factor;
  for (float& f : inv) {
    const float wavelen = float(2.0 * std::numbers::pi) / f;
    if (wavelen > float(low_wavelen)) {
      f = f / float(s.factor);
    } else if (!(wavelen < float(high_wavelen))) {  // medium frequencies: interpolate
      const float smooth = (float(old_ctx) / wavelen - float(s.low_freq_factor)) /
                           float(s.high_freq_factor - s.low_freq_factor);
      f = (1.0f - smooth) * f / float(s.factor) + smooth * f;
    }
  }
}

// Returns the attention factor.
float ApplyYarn(const RopeScaling& s, double theta, int64_t dims, std::vector<float>& inv) {
  const double factor = s.factor;
  const double l0 = s.original_max_position;
  auto correction_dim = [&](double rotations) {
    return double(dims) * std::log(l0 / (rotations * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dims - 1));
  if (low == high) high += 0.001;
  const std::vector<float> pos_freq = DefaultInvFreq(theta, dims);
  for (size_t i = 0; i < inv.size(); ++i) {
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float interpolation = pos_freq[i] / float(factor);
    inv[i] = interpolation * (1.0f - extrapolation) + pos_freq[i] * extrapolation;
  }
  if (s.attention_factor > 0) return float(s.attention_factor);
  if (s.mscale != 0 && s.mscale_all_dim != 0) {
    return float(YarnMscale(factor, s.mscale) / YarnMscale(factor, s.mscale_all_dim));
  }
  return float(YarnMscale(factor, 1.0));
}

}  // namespace

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies ComputeRopeFrequencies(double theta, int64_t rotary_dims,
                                       const RopeScaling& scaling, int64_t max_position,
                                       int64_t seq_len) {
  RopeFrequencies out;
  switch (scaling.type) {
    case RopeScaling::Type::kNone:
      out.inv_freq = DefaultInvFreq(theta, rotary_dims);
      break;
    case RopeScaling::Type::kLinear:
      out.inv_freq = DefaultInvFreq(theta, rotary_dims);
      for (float& f : out.inv_freq) f /= float(scaling.factor);
      break;
    case RopeScaling::Type::kLlama3:
      out.inv_freq = DefaultInvFreq(theta, rotary_dims);
      ApplyLlama3(scaling, out.inv_freq);
      break;
    case RopeScaling::Type::kYarn:
      out.inv_freq = DefaultInvFreq(theta, rotary_dims);
      out.attention_factor = ApplyYarn(scaling, theta, rotary_dims, out.inv_freq);
      break;
    case RopeScaling::Type::kDynamic: {
      // NTK-aware: grow the base once the sequence outgrows the trained context.
      const double trained = max_position;
      double base = theta;
      if (double(seq_len) > trained) {
        base = theta * std::pow(scaling.factor * double(seq_len) / trained - (scaling.factor - 1),
                                double(rotary_dims) / double(rotary_dims - 2));
      }
      out.inv_freq = DefaultInvFreq(base, rotary_dims);
      break;
    }
  }
  return out;
}

}  // namespace anymoe
