#include "models/blocks/mla_form.h"

#include <string>

namespace anymoe {
namespace {

// Keys summed over the segment's queries: query i of t sees n_past + i + 1.
double KeyVisits(int64_t t, int64_t n_past) {
  return double(t) * double(n_past) + double(t) * double(t + 1) / 2;
}

// Each form's multiply-adds with its terms weighted (1: plain counts).
double AbsorbedCost(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past,
                    double projection_cost) {
  const double r = double(m.kv_lora_rank), dr = double(m.qk_rope_head_dim);
  const double projections =
      double(t) * double(heads) * r * double(m.qk_nope_head_dim + m.v_head_dim);
  return projections * projection_cost + KeyVisits(t, n_past) * double(heads) * (2 * r + dr);
}

double ExpandedCost(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past,
                    double pair_cost, double expansion_cost) {
  const double r = double(m.kv_lora_rank);
  const double expansion =
      double(n_past + t) * double(heads) * r * double(m.qk_nope_head_dim + m.v_head_dim);
  const double pair = double(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
  return expansion * expansion_cost + KeyVisits(t, n_past) * double(heads) * pair * pair_cost;
}

}  // namespace

std::string_view MlaFormName(MlaForm form) {
  switch (form) {
    case MlaForm::kAbsorbed:
      return "absorbed";
    case MlaForm::kExpanded:
      return "expanded";
    case MlaForm::kAuto:
      return "auto";
  }
  return "?";
}

Expected<MlaForm> ParseMlaForm(std::string_view name) {
  for (MlaForm f : {MlaForm::kAbsorbed, MlaForm::kExpanded, MlaForm::kAuto}) {
    if (name == MlaFormName(f)) return f;
  }
  return Status::Error("--mla-form " + std::string(name) + ": use absorbed, expanded or auto");
}

double AbsorbedMlaMacs(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past) {
  return AbsorbedCost(m, heads, t, n_past, 1);
}

double ExpandedMlaMacs(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past) {
  return ExpandedCost(m, heads, t, n_past, 1, 1);
}

// Multiply-adds do not all cost the same. Relative to one of the absorbed
// latent-attention kernel (every key row shared by all heads), measured per
// op with `anymoe bench --op-profile` on DeepSeek-V3's attention widths
// (models/bench/dsv3attn-1l-w7168-dense-q8_0.gguf, pp512 @ d4096, Zen 4,
// 2 threads: latent attention 99 G/s, per-head attention 62, the absorbed
// form's per-head projections 62, the expansion matmul 87 plus its copies):
constexpr double kPerHeadPairCost = 1.6;     // expanded attention, a key row per head
constexpr double kHeadProjectionCost = 1.6;  // absorbed q_nope -> latent and latent -> v
constexpr double kExpansionCost = 1.3;       // k_nope|v from the latent, and the copies

bool ExpandedMlaIsCheaper(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past) {
  return ExpandedCost(m, heads, t, n_past, kPerHeadPairCost, kExpansionCost) <
         AbsorbedCost(m, heads, t, n_past, kHeadProjectionCost);
}

int64_t ExpandedMlaHeadGroup(const MlaConfig& m, int64_t heads, int64_t max_keys,
                             int64_t budget_floats) {
  const int64_t per_head =
      max_keys * (2 * m.qk_nope_head_dim + m.qk_rope_head_dim + 2 * m.v_head_dim);
  int64_t best = 1;
  for (int64_t g = 1; g <= heads; ++g) {
    if (heads % g == 0 && g * per_head <= budget_floats) best = g;
  }
  return best;
}

}  // namespace anymoe
