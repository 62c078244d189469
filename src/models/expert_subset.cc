#include "models/expert_subset.h"

#include <algorithm>
#include <string>

namespace anymoe {
namespace {

Status Invalid(const std::string& message) {
  return Status::Error("expert pruning: " + message, ErrorKind::kInvalidArgument, "prune_invalid");
}

}  // namespace

int64_t ExpertSubset::kept_per_layer() const {
  for (const auto& k : kept) {
    if (!k.empty()) return int64_t(k.size());
  }
  return 0;
}

std::span<const int32_t> ExpertSubset::layer(int64_t l) const {
  if (l < 0 || l >= int64_t(kept.size())) return {};
  return kept[size_t(l)];
}

Status ExpertSubset::Check(const ModelConfig& c) const {
  const MoeConfig& m = c.moe;
  if (!c.is_moe()) return Invalid("the model has no routed experts");
  if (file_experts != m.num_experts) {
    return Invalid("made for " + std::to_string(file_experts) + " experts per layer, the model has " +
                   std::to_string(m.num_experts));
  }
  if (int64_t(kept.size()) != c.num_layers) {
    return Invalid("names " + std::to_string(kept.size()) + " layers, the model has " +
                   std::to_string(c.num_layers));
  }
  const int64_t n = kept_per_layer();
  if (n < m.experts_per_token) {
    return Invalid("keeps " + std::to_string(n) + " experts per layer, fewer than the " +
                   std::to_string(m.experts_per_token) + " each token is routed to");
  }
  const int64_t groups = std::max<int64_t>(m.n_group, 1);
  if (groups > 1 && (n % groups != 0 || n / groups < 2)) {
    return Invalid("group-limited routing over " + std::to_string(groups) +
                   " groups needs the same number (at least 2) of experts kept in each group; " +
                   std::to_string(n) + " per layer cannot be");
  }
  const int64_t per_group = m.num_experts / groups;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto& k = kept[size_t(l)];
    const bool moe = c.ffn_kinds[size_t(l)] == FfnKind::kMoe;
    const std::string where = "layer " + std::to_string(l) + ": ";
    if (!moe) {
      if (!k.empty()) return Invalid(where + "a dense layer has no experts to keep");
      continue;
    }
    if (int64_t(k.size()) != n) {
      return Invalid(where + "keeps " + std::to_string(k.size()) + " experts, other layers " +
                     std::to_string(n));
    }
    std::vector<int64_t> in_group(size_t(groups), 0);
    for (size_t j = 0; j < k.size(); ++j) {
      if (k[j] < 0 || k[j] >= m.num_experts || (j > 0 && k[j] <= k[j - 1])) {
        return Invalid(where + "expert ids must be distinct, ascending and below " +
                       std::to_string(m.num_experts));
      }
      ++in_group[size_t(k[j] / per_group)];
    }
    for (int64_t g = 0; g < groups; ++g) {
      if (in_group[size_t(g)] != n / groups) {
        return Invalid(where + "group " + std::to_string(g) + " keeps " +
                       std::to_string(in_group[size_t(g)]) + " experts, expected " +
                       std::to_string(n / groups));
      }
    }
  }
  return Status::Ok();
}

}  // namespace anymoe
