// Which rank owns each routed expert of each MoE layer under expert
// parallelism: contiguous ranges by default, or a placement file (JSON, e.g.
// from tools/ep_placement.py over `--routing-stats`) that spreads hot experts.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace anymoe {

class ExpertPlacement {
 public:
  // Rank r owns experts [r * E / N, (r + 1) * E / N) of every MoE layer.
  static ExpertPlacement Contiguous(int ranks, std::span<const int64_t> moe_layers,
                                    int64_t experts);
  // {"ranks": N, "layers": [{"layer": L, "owners": [rank of expert 0, ...]}, ...]};
  // MoE layers not listed keep the contiguous default. Errors name the file,
  // layer and expert: a layer that is not a MoE layer or listed twice, an
  // owners list of the wrong length, a rank out of range, "ranks" other than
  // the job's size.
  static Expected<ExpertPlacement> FromJson(const nlohmann::json& doc, const std::string& name,
                                            int ranks, std::span<const int64_t> moe_layers,
                                            int64_t experts);
  static Expected<ExpertPlacement> Load(const std::string& path, int ranks,
                                        std::span<const int64_t> moe_layers, int64_t experts);

  int ranks() const { return ranks_; }
  // Owners of layer `layer`'s experts (empty for a layer that is not MoE).
  std::span<const int32_t> owners(int64_t layer) const;
  // Experts of `layer` that `rank` owns.
  int64_t owned(int64_t layer, int rank) const;

 private:
  int ranks_ = 1;
  std::vector<std::vector<int32_t>> owners_;  // [model layer][expert]
};

}  // namespace anymoe
