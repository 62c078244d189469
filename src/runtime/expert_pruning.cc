#include "runtime/expert_pruning.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "models/config_loader.h"
#include "models/model_fingerprint.h"

namespace anymoe {
namespace {

Status SpecError(std::string_view spec, const std::string& why) {
  return Status::Error("--expert-prune '" + std::string(spec) + "': " + why +
                           " (expected PROFILE.json:KEEP, KEEP experts per layer or a share "
                           "like 50%)",
                       ErrorKind::kInvalidArgument, "prune_spec_invalid");
}

}  // namespace

Expected<PruneSpec> ParsePruneSpec(std::string_view spec) {
  const size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == spec.size()) {
    return SpecError(spec, "no PROFILE:KEEP");
  }
  PruneSpec out;
  out.profile = std::string(spec.substr(0, colon));
  std::string keep(spec.substr(colon + 1));
  const bool share = keep.back() == '%';
  if (share) keep.pop_back();
  if (keep.empty() || keep.size() > 24 ||
      keep.find_first_not_of("0123456789.") != std::string::npos) {
    return SpecError(spec, "KEEP is not a number");
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(keep.c_str(), &end);
  if (errno != 0 || end != keep.c_str() + keep.size() || !std::isfinite(v)) {
    return SpecError(spec, "KEEP is not a number");
  }
  if (share) {
    if (!(v > 0 && v <= 100)) return SpecError(spec, "a share must be in (0, 100] %");
    out.percent = v;
  } else {
    if (v < 1 || v != std::floor(v) || v > 1e9) return SpecError(spec, "a count must be a whole number >= 1");
    out.count = int64_t(v);
  }
  return out;
}

Expected<ExpertRanking> ParsePruneRanking(std::string_view name) {
  if (name == "count" || name == "frequency") return ExpertRanking::kFrequency;
  if (name == "saliency") return ExpertRanking::kSaliency;
  return Status::Error("--prune-by '" + std::string(name) + "': expected count or saliency",
                       ErrorKind::kInvalidArgument, "prune_spec_invalid");
}

int64_t KeptExpertsPerLayer(const PruneSpec& spec, const ModelConfig& config) {
  if (spec.count > 0) return spec.count;
  const int64_t groups = std::max<int64_t>(config.moe.n_group, 1);
  const double per_group = double(config.moe.num_experts / groups) * spec.percent / 100.0;
  return std::max<int64_t>(1, std::llround(per_group)) * groups;
}

Expected<ExpertSubset> SelectKeptExperts(const ExpertProfile& profile, const ModelConfig& config,
                                         const PruneSpec& spec, ExpertRanking ranking) {
  const int64_t e = config.moe.num_experts, keep = KeptExpertsPerLayer(spec, config);
  if (keep > e) {
    return Status::Error("--expert-prune: keeps " + std::to_string(keep) +
                             " experts per layer, the model has " + std::to_string(e),
                         ErrorKind::kInvalidArgument, "prune_invalid");
  }
  const int64_t groups = std::max<int64_t>(config.moe.n_group, 1), per_group = e / groups;
  ExpertSubset subset;
  subset.file_experts = e;
  subset.kept.resize(size_t(config.num_layers));
  // Ranked() orders every (layer, expert) best first; each layer (group)
  // takes its first `keep` (per group: keep / groups).
  std::vector<std::vector<int64_t>> taken(size_t(config.num_layers),
                                          std::vector<int64_t>(size_t(groups), 0));
  for (const ExpertRef& x : profile.Ranked(ranking)) {
    if (x.layer < 0 || x.layer >= config.num_layers) continue;  // CheckModel ruled this out
    int64_t& n = taken[size_t(x.layer)][size_t(x.expert / per_group)];
    if (n >= keep / groups) continue;
    ++n;
    subset.kept[size_t(x.layer)].push_back(x.expert);
  }
  for (auto& k : subset.kept) std::sort(k.begin(), k.end());
  RETURN_IF_ERROR(subset.Check(config));
  return subset;
}

Expected<ExpertSubset> PlanExpertPruning(const ModelFile& file, const ExpertPruneOptions& options) {
  ASSIGN_OR_RETURN(const PruneSpec spec, ParsePruneSpec(options.spec));
  ASSIGN_OR_RETURN(const ModelConfig config, LoadModelConfig(file));
  ASSIGN_OR_RETURN(const ExpertProfile profile, ExpertProfile::Load(spec.profile));
  RETURN_IF_ERROR(profile.CheckModel(ModelFingerprint(file), config)
                      .WithContext("--expert-prune " + spec.profile));
  return SelectKeptExperts(profile, config, spec, options.ranking);
}

std::string DescribePruning(const ExpertSubset& subset, const ExpertPruneOptions& options) {
  const size_t colon = options.spec.rfind(':');
  return "pruned to " + std::to_string(subset.kept_per_layer()) + " of " +
         std::to_string(subset.file_experts) + " experts per layer by " +
         (options.ranking == ExpertRanking::kSaliency ? "saliency" : "count") + " (" +
         options.spec.substr(0, colon) + ")";
}

}  // namespace anymoe
