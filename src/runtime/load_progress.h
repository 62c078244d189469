// Load progress for big model files on stderr: on a terminal a bar with bytes,
// rate and time left, redrawn at most ten times a second; otherwise one
// summary line when done. Files under kProgressMinBytes load silently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace anymoe {

inline constexpr uint64_t kProgressMinBytes = uint64_t(1) << 30;

class LoadProgress {
 public:
  // `show`: print at all (the caller's policy, e.g. not for `serve` logs).
  LoadProgress(std::string label, uint64_t total, bool show);
  void Add(uint64_t bytes);
  void Finish();

  // For LoadOptions::progress: called with each weight's bytes, then (0, true).
  // Shows only when `total` is at least kProgressMinBytes.
  static std::function<void(uint64_t, bool)> Callback(std::string label, uint64_t total, bool show);

 private:
  void Draw(bool last);

  std::string label_;
  uint64_t total_, done_ = 0;
  bool show_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace anymoe
