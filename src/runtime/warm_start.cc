#include "runtime/warm_start.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "models/model_fingerprint.h"
#include "runtime/expert_profile.h"
#include "runtime/load_progress.h"

namespace anymoe {

Expected<std::unique_ptr<WarmStart>> WarmStart::Start(Model& model, const ModelFile& file,
                                                      const WarmStartOptions& options) {
  if (!(options.pin_percent >= 0 && options.pin_percent <= 50)) {
    return Status::Error("--pin-experts " + std::to_string(options.pin_percent) +
                             ": give a share of the expert cache's slots in [0, 50]",
                         ErrorKind::kInvalidArgument, "pin_out_of_range");
  }
  std::unique_ptr<WarmStart> w(new WarmStart);
  ASSIGN_OR_RETURN(ExpertProfile profile, ExpertProfile::Load(options.profile));
  RETURN_IF_ERROR(profile.CheckModel(ModelFingerprint(file), model.config())
                      .WithContext("--expert-profile " + options.profile));
  w->cache_ = model.expert_cache();
  if (w->cache_ == nullptr) {
    if (options.progress) {
      std::fprintf(stderr, "anymoe: --expert-profile: every expert is resident; nothing to warm\n");
    }
    return w;
  }
  std::vector<ExpertRef> wanted;
  for (const ExpertRef& x : profile.Ranked(ExpertRanking::kFrequency)) {
    for (const LayerProfile& l : profile.layers) {
      if (l.layer == x.layer && l.tokens_routed[size_t(x.expert)] > 0) wanted.push_back(x);
    }
  }
  const ExpertCacheStats stats = w->cache_->stats();
  const int64_t pin = int64_t(std::floor(options.pin_percent / 100.0 * double(stats.slots)));
  w->cache_->Warm(wanted, pin);
  int64_t experts = 0;
  for (const LayerProfile& l : profile.layers) experts += int64_t(l.tokens_routed.size());
  const uint64_t expert_bytes = experts > 0 ? stats.routed_bytes / uint64_t(experts) : 0;
  w->reporter_ = std::thread(
      [p = w.get(), expert_bytes, show = options.progress] { p->Report(expert_bytes, show); });
  return w;
}

void WarmStart::Report(uint64_t expert_bytes, bool show) {
  const ExpertCache::WarmProgress first = cache_->warm_progress();
  // The bar on a terminal only: the line below says what a log needs.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  LoadProgress bar("warm start", uint64_t(first.queued) * expert_bytes, show && tty);
  const auto start = std::chrono::steady_clock::now();
  int64_t shown = 0;
  for (;;) {
    const ExpertCache::WarmProgress p = cache_->warm_progress();
    bar.Add(uint64_t(p.done - shown) * expert_bytes);
    shown = p.done;
    if (p.done >= p.queued || stop_) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (show) {
    const ExpertCache::WarmProgress p = cache_->warm_progress();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%sanymoe: warm start: %lld of %lld experts read in %.2f s, %lld pinned\n",
                 tty ? "\r\033[K" : "", (long long)p.done, (long long)p.queued, s,
                 (long long)p.pinned);
  }
}

void WarmStart::Wait() {
  if (reporter_.joinable()) reporter_.join();
}

WarmStart::~WarmStart() {
  stop_ = true;
  Wait();
}

}  // namespace anymoe
