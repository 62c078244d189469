// Prometheus metrics for GET /metrics (text exposition format 0.0.4), all
// prefixed anymoe_: responses by endpoint and status code, prompt/generated
// token counters, TTFT / TPOT / end-to-end latency histograms, requests by
// finish reason, and (rendered from a snapshot) scheduler load, KV cache use and
// per-layer expert selection counts. Thread-safe: handlers on many HTTP threads
// record into one ServerMetrics.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "runtime/scheduler.h"

namespace anymoe {

// Cumulative histogram with fixed upper bounds (seconds); +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends # HELP/# TYPE and the _bucket{le=...}, _sum and _count lines.
  void Render(std::string_view name, std::string_view help, std::string* out) const;
  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What one finished generation request contributes.
struct RequestRecord {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double ttft_seconds = -1;  // < 0: no token was generated
  double e2e_seconds = 0;
  std::string_view finish_reason;  // stop | length | cancelled | error
};

// Load seen at render time; any part may be absent (model still loading).
struct MetricsSnapshot {
  bool ready = false;
  const SchedulerStats* scheduler = nullptr;
  const RoutingStats* routing = nullptr;
  uint64_t model_version = 0;  // live expert swaps applied (with `scheduler`)
};

class ServerMetrics {
 public:
  ServerMetrics();
  // Every HTTP response; `endpoint` is a route name or "other" (bounded labels).
  void CountResponse(std::string_view endpoint, int status);
  void RecordRequest(const RequestRecord& record);
  std::string Render(const MetricsSnapshot& snapshot) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::map<std::string, uint64_t> finished_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generated_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_;
};

}  // namespace anymoe
