#include "runtime/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace anymoe {

LoadProgress::LoadProgress(std::string label, uint64_t total, bool show)
    : label_(std::move(label)),
      total_(total),
      show_(show),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void LoadProgress::Add(uint64_t bytes) {
  done_ += bytes;
  if (!show_ || !tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  Draw(false);
}

void LoadProgress::Draw(bool last) {
  const double gib = double(uint64_t(1) << 30);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? double(done_) / seconds : 0;  // bytes/s
  const uint64_t done = std::min(done_, total_);
  if (tty_ && !last) {
    constexpr int kWidth = 30;
    const int filled = total_ ? int(kWidth * double(done) / double(total_)) : kWidth;
    const double eta = rate > 0 ? double(total_ - done) / rate : 0;
    std::fprintf(stderr, "\r%s [%.*s%*s] %5.1f%% %.2f / %.2f GiB  %.0f MiB/s  ETA %.0f s ",
                 label_.c_str(), filled, "==============================", kWidth - filled, "",
                 total_ ? 100.0 * double(done) / double(total_) : 100.0, double(done) / gib,
                 double(total_) / gib, rate / double(1 << 20), eta);
    return;
  }
  std::fprintf(stderr, "%s%s: %.2f GiB in %.1f s (%.0f MiB/s)\n", tty_ ? "\r\033[K" : "",
               label_.c_str(), double(done_) / gib, seconds, rate / double(1 << 20));
}

void LoadProgress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (show_) Draw(true);
}

std::function<void(uint64_t, bool)> LoadProgress::Callback(std::string label, uint64_t total,
                                                           bool show) {
  auto p =
      std::make_shared<LoadProgress>(std::move(label), total, show && total >= kProgressMinBytes);
  return [p](uint64_t bytes, bool done) {
    if (done) return p->Finish();
    p->Add(bytes);
  };
}

}  // namespace anymoe
