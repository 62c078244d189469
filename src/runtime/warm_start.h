// Warm start from an expert profile (--expert-profile FILE, --pin-experts PCT):
// the profile's most used experts are read into the expert cache in the
// background as soon as the model is loaded (behind any step's own misses, so
// requests need not wait for it), and the top PCT % of the cache's slots stay
// pinned against eviction. The profile must name this model
// (ExpertProfile::CheckModel). Results do not change: a cached expert runs
// the same kernels on the same bytes.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "models/model.h"
#include "models/model_file.h"

namespace anymoe {

struct WarmStartOptions {
  std::string profile;     // expert profile file (empty: no warm start)
  double pin_percent = 0;  // of the cache's slots, at most 50
  bool progress = true;    // a bar on a terminal, else one line at the end
};

class WarmStart {
 public:
  // Checks the profile against the model, queues the reads and starts the
  // progress reporter. Without streamed experts (every expert resident) it
  // only checks the profile and says there is nothing to warm.
  static Expected<std::unique_ptr<WarmStart>> Start(Model& model, const ModelFile& file,
                                                    const WarmStartOptions& options);
  ~WarmStart();
  // Blocks until every queued read is done (tests, benchmarks).
  void Wait();

 private:
  WarmStart() = default;
  void Report(uint64_t expert_bytes, bool show);

  ExpertCache* cache_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread reporter_;
};

}  // namespace anymoe
