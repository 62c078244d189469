// Expert profiles: what a workload asks of each routed expert, per MoE layer,
// measured on the tokens that went through the model (`anymoe profile` on a
// corpus, `anymoe serve --profile-out` on live traffic). Per expert:
// - tokens routed: (token, expert) selections;
// - probability mass: the router's probability of the expert summed over every
//   token (softmax routers: the softmax over all experts; sigmoid routers: the
//   sigmoid scores normalised to sum 1 over the experts), chosen or not;
// - saliency (REAP, Lasby et al. 2025): the combining weight times the L2 norm
//   of the expert's output, averaged over the tokens routed to it (0 when none).
// A profile names its model by ModelFingerprint and refuses any other, so a
// warm start or a pruning never applies one model's statistics to another.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "models/blocks/step_context.h"
#include "models/experts/expert_cache.h"
#include "models/model_config.h"

namespace anymoe {

struct LayerProfile {
  int64_t layer = 0;                     // model layer index
  std::vector<int64_t> tokens_routed;    // [experts]
  std::vector<double> probability_mass;  // [experts]
  std::vector<double> saliency;          // [experts]: mean over the tokens routed
};

// How experts are ranked: by tokens routed (frequency) or by saliency.
enum class ExpertRanking { kFrequency, kSaliency };

struct ExpertProfile {
  std::string model_name;   // the file it was measured on (informative)
  std::string fingerprint;  // ModelFingerprint of that file (checked)
  std::string source;       // what traffic it measured ("corpus FILE", "serve")
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t tokens = 0;  // token rows that went through the model
  std::vector<LayerProfile> layers;

  std::string ToJson() const;
  // Writes ToJson() to `path` through a temporary file renamed over it, so a
  // reader never sees half a profile.
  Status Write(const std::string& path) const;
  // Parses and validates (format, version, sizes, finite non-negative values);
  // `name` labels errors. Error codes: "profile_malformed".
  static Expected<ExpertProfile> Parse(std::string_view json, const std::string& name);
  // Reads at most 256 MiB from `path` and parses it.
  static Expected<ExpertProfile> Load(const std::string& path);
  // An error ("profile_model_mismatch") unless the profile was measured on a
  // model with `fingerprint` and the shapes of `config`.
  Status CheckModel(const std::string& fingerprint, const ModelConfig& config) const;

  // Every (layer, expert), most used first by `ranking` (ties: probability
  // mass, then layer and expert ascending, so the order is deterministic).
  std::vector<ExpertRef> Ranked(ExpertRanking ranking) const;
};

// Accumulates a profile from a model's forward steps. Install with
// Model::SetObserver(&profiler.observer()); it must outlive that. Steps call
// the observer on the model's thread; Snapshot may be called from any thread.
class ExpertProfiler {
 public:
  ExpertProfiler(const ModelConfig& config, std::string model_name, std::string fingerprint,
                 std::string source);
  const ForwardObserver& observer() const { return observer_; }
  ExpertProfile Snapshot() const;

 private:
  void Record(const RoutedExpertOutputs& routed);

  ForwardObserver observer_;
  int64_t hidden_ = 0;
  mutable std::mutex mu_;
  ExpertProfile profile_;             // saliency holds sums until Snapshot
  std::vector<int64_t> layer_index_;  // model layer -> index in profile_.layers (-1: none)
  int64_t first_moe_layer_ = -1;      // counts tokens once per step
  std::vector<float> logits_, outputs_, probs_;  // host copies, reused
};

}  // namespace anymoe
