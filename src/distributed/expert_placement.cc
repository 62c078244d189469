#include "distributed/expert_placement.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "formats/parse_util.h"

namespace anymoe {

ExpertPlacement ExpertPlacement::Contiguous(int ranks, std::span<const int64_t> moe_layers,
                                            int64_t experts) {
  ExpertPlacement p;
  p.ranks_ = ranks;
  const int64_t layers = moe_layers.empty() ? 0 : *std::max_element(moe_layers.begin(), moe_layers.end()) + 1;
  p.owners_.resize(size_t(layers));
  for (int64_t l : moe_layers) {
    auto& owners = p.owners_[size_t(l)];
    owners.resize(size_t(experts));
    for (int r = 0; r < ranks; ++r) {
      for (int64_t e = r * experts / ranks; e < (r + 1) * experts / ranks; ++e) owners[size_t(e)] = r;
    }
  }
  return p;
}

Expected<ExpertPlacement> ExpertPlacement::FromJson(const nlohmann::json& doc,
                                                    const std::string& name, int ranks,
                                                    std::span<const int64_t> moe_layers,
                                                    int64_t experts) {
  const std::string where = name + ": expert placement: ";
  if (!doc.is_object()) return Status::Error(where + "not a JSON object");
  if (auto it = doc.find("ranks"); it != doc.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() != ranks) {
      return Status::Error(where + "\"ranks\" is " + it->dump() + " but the job has " +
                           std::to_string(ranks) + " ranks");
    }
  }
  auto layers = doc.find("layers");
  if (layers == doc.end() || !layers->is_array()) {
    return Status::Error(where + "missing \"layers\" (an array of {\"layer\", \"owners\"})");
  }
  ExpertPlacement p = Contiguous(ranks, moe_layers, experts);
  std::vector<bool> seen(p.owners_.size(), false);
  for (const nlohmann::json& entry : *layers) {
    auto layer = entry.is_object() ? entry.find("layer") : entry.end();
    if (!entry.is_object() || layer == entry.end() || !layer->is_number_integer()) {
      return Status::Error(where + "every entry of \"layers\" needs an integer \"layer\"");
    }
    const int64_t l = layer->get<int64_t>();
    const std::string at = where + "layer " + std::to_string(l) + ": ";
    if (std::find(moe_layers.begin(), moe_layers.end(), l) == moe_layers.end()) {
      return Status::Error(at + "not a MoE layer of this model");
    }
    if (seen[size_t(l)]) return Status::Error(at + "listed twice");
    seen[size_t(l)] = true;
    auto owners = entry.find("owners");
    if (owners == entry.end() || !owners->is_array()) {
      return Status::Error(at + "needs \"owners\": the rank of each expert");
    }
    if (int64_t(owners->size()) != experts) {
      return Status::Error(at + "\"owners\" names " + std::to_string(owners->size()) +
                           " experts, the model has " + std::to_string(experts) +
                           " (every expert needs exactly one owner)");
    }
    for (int64_t e = 0; e < experts; ++e) {
      const nlohmann::json& r = (*owners)[size_t(e)];
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() >= ranks) {
        return Status::Error(at + "expert " + std::to_string(e) + ": owner " + r.dump() +
                             " is not a rank in [0, " + std::to_string(ranks) + ")");
      }
      p.owners_[size_t(l)][size_t(e)] = int32_t(r.get<int64_t>());
    }
  }
  return p;
}

Expected<ExpertPlacement> ExpertPlacement::Load(const std::string& path, int ranks,
                                                std::span<const int64_t> moe_layers,
                                                int64_t experts) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ReadJsonFile(path, uint64_t(64) << 20));
  return FromJson(doc, path, ranks, moe_layers, experts);
}

std::span<const int32_t> ExpertPlacement::owners(int64_t layer) const {
  if (layer < 0 || layer >= int64_t(owners_.size())) return {};
  return owners_[size_t(layer)];
}

int64_t ExpertPlacement::owned(int64_t layer, int rank) const {
  const auto o = owners(layer);
  return std::count(o.begin(), o.end(), rank);
}

}  // namespace anymoe
