#include "backends/cpu/route.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace anymoe::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Index of the largest value in v[0..n) not yet taken; ties to the lower index.
int64_t ArgmaxNotTaken(const float* v, int64_t n, const bool* taken) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (best < 0 || v[i] > v[best]) best = i;
  }
  return best;
}

// Keeps the topk_group groups with the largest sum of their two best scores and
// sets the other groups' scores to -inf (current transformers; older used 0).
void MaskGroups(float* sel, int64_t num_experts, int n_group, int topk_group) {
  const int64_t per = num_experts / n_group;
  float group_score[256];
  bool keep[256] = {};
  CHECK(n_group <= 256);
  for (int g = 0; g < n_group; ++g) {
    const float* s = sel + g * per;
    float a = kNegInf, b = kNegInf;  // best two
    for (int64_t i = 0; i < per; ++i) {
      if (s[i] > a) {
        b = a;
        a = s[i];
      } else if (s[i] > b) {
        b = s[i];
      }
    }
    group_score[g] = a + b;
  }
  bool taken[256] = {};
  for (int r = 0; r < topk_group; ++r) {
    const int64_t g = ArgmaxNotTaken(group_score, n_group, taken);
    taken[g] = keep[g] = true;
  }
  for (int g = 0; g < n_group; ++g) {
    if (!keep[g]) std::fill(sel + g * per, sel + (g + 1) * per, kNegInf);
  }
}

}  // namespace

void RouteToken(const float* logits, const float* bias, int64_t num_experts,
                const RouterSpec& spec, float* scratch, int32_t* ids, float* weights) {
  float* score = scratch;                  // what the weights come from
  float* sel = scratch + num_experts;      // what the choice is made on
  bool* taken = reinterpret_cast<bool*>(scratch + 2 * num_experts);
  if (spec.scoring == RouterSpec::Scoring::kSoftmax) {
    const float mx = *std::max_element(logits, logits + num_experts);
    float sum = 0;
    for (int64_t e = 0; e < num_experts; ++e) sum += (score[e] = std::exp(logits[e] - mx));
    for (int64_t e = 0; e < num_experts; ++e) score[e] /= sum;
  } else {
    for (int64_t e = 0; e < num_experts; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  }
  for (int64_t e = 0; e < num_experts; ++e) sel[e] = score[e] + (bias ? bias[e] : 0.0f);
  if (spec.n_group > 1) MaskGroups(sel, num_experts, spec.n_group, spec.topk_group);

  std::fill(taken, taken + num_experts, false);
  float total = 0;
  for (int k = 0; k < spec.experts_per_token; ++k) {
    const int64_t e = ArgmaxNotTaken(sel, num_experts, taken);
    taken[e] = true;
    ids[k] = int32_t(e);
    weights[k] = score[e];
    total += score[e];
  }
  // Sigmoid routers add 1e-20 to the denominator; softmax ones divide by the plain sum.
  const float denom = spec.scoring == RouterSpec::Scoring::kSigmoid ? total + 1e-20f : total;
  for (int k = 0; k < spec.experts_per_token; ++k) {
    if (spec.normalize) weights[k] /= denom;
    weights[k] *= spec.scaling;
  }
}

}  // namespace anymoe::cpu
