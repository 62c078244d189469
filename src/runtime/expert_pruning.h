// Expert pruning at load (--expert-prune PROFILE:KEEP): which routed experts of
// each MoE layer a deployment keeps, chosen from an expert profile of the same
// model by frequency (tokens routed) or by REAP saliency. The model then loads
// only those experts (models/expert_subset.h); `anymoe prune` writes the same
// model as a GGUF file (runtime/pruned_gguf.h).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "models/expert_subset.h"
#include "models/model_config.h"
#include "models/model_file.h"
#include "runtime/expert_profile.h"

namespace anymoe {

// --prune-by: saliency by default. REAP (Lasby et al. 2025) found ranking by
// router weight x output norm keeps quality better than by frequency; the
// table in docs/expert-profiles.md measures both on our routing-study model.
struct ExpertPruneOptions {
  std::string spec;  // "PROFILE:KEEP" (empty: no pruning)
  ExpertRanking ranking = ExpertRanking::kSaliency;
};

// "PROFILE:KEEP": KEEP is a count of experts per layer ("32") or a share of
// them ("50%"); the profile's path is everything before the last ':'.
struct PruneSpec {
  std::string profile;
  int64_t count = 0;   // > 0: experts per layer
  double percent = 0;  // else: share of the layer's experts, in (0, 100]
};
// Error code "prune_spec_invalid".
Expected<PruneSpec> ParsePruneSpec(std::string_view spec);
Expected<ExpertRanking> ParsePruneRanking(std::string_view name);  // "count" | "saliency"

// The experts per layer `spec` keeps of `config`'s (a share rounds to the
// nearest count, per group under group-limited routing).
int64_t KeptExpertsPerLayer(const PruneSpec& spec, const ModelConfig& config);

// The `spec`'s experts per layer that rank first by `ranking` in `profile`
// (ties: probability mass, then the lower id; per group under group-limited
// routing), in ascending id order. `config` is the file's (unpruned) config;
// the result is checked (ExpertSubset::Check).
Expected<ExpertSubset> SelectKeptExperts(const ExpertProfile& profile, const ModelConfig& config,
                                         const PruneSpec& spec, ExpertRanking ranking);

// All of it for a model file: parses the spec, reads the profile, checks it
// names `file` (profile_model_mismatch) and selects.
Expected<ExpertSubset> PlanExpertPruning(const ModelFile& file, const ExpertPruneOptions& options);

// "pruned to 4 of 8 experts per layer by saliency (PROFILE)", for logs.
std::string DescribePruning(const ExpertSubset& subset, const ExpertPruneOptions& options);

}  // namespace anymoe
