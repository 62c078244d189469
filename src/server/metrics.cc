#include "server/metrics.h"

#include <cinttypes>
#include <cstdio>

namespace anymoe {
namespace {

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string Num(uint64_t v) { return std::to_string(v); }
std::string Num(int64_t v) { return std::to_string(v); }

void Header(std::string_view name, std::string_view type, std::string_view help, std::string* out) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

template <typename T>
void Gauge(std::string_view name, std::string_view help, T value, std::string* out) {
  Header(name, "gauge", help, out);
  *out += name;
  *out += ' ' + Num(value) + '\n';
}

void Counter(std::string_view name, std::string_view help, uint64_t value, std::string* out) {
  Header(name, "counter", help, out);
  *out += name;
  *out += ' ' + Num(value) + '\n';
}

// Streamed experts (models/experts/expert_cache.h): counters since load.
void RenderExpertCache(const ExpertCacheStats& c, std::string* out) {
  Gauge("anymoe_expert_cache_slots", "experts the expert cache holds at once", c.slots, out);
  Gauge("anymoe_expert_cache_on_device",
        "1: the slots are device memory (reads are uploaded into them), 0: host memory",
        uint64_t(c.device ? 1 : 0), out);
  Gauge("anymoe_expert_cache_bytes", "memory of the expert cache's slots", c.capacity_bytes, out);
  Counter("anymoe_expert_cache_lookups_total", "routed experts the forward steps used", c.lookups,
          out);
  Counter("anymoe_expert_cache_hits_total", "... found in the expert cache (loaded or loading)",
          c.hits, out);
  Counter("anymoe_expert_cache_misses_total", "... that had to be read from disk", c.misses, out);
  Counter("anymoe_expert_cache_evictions_total", "experts evicted from the cache", c.evictions,
          out);
  Counter("anymoe_expert_cache_read_bytes_total", "bytes of experts read from the model file",
          c.bytes_read, out);
  Counter("anymoe_expert_cache_read_errors_total", "expert reads that failed", c.read_errors, out);
  Counter("anymoe_expert_cache_warm_loads_total",
          "experts read by the warm start (--expert-profile)", c.warm_loads, out);
  Gauge("anymoe_expert_cache_pinned", "slots pinned against eviction (--pin-experts)",
        uint64_t(c.pinned), out);
  Counter("anymoe_expert_cache_tokens_total", "token rows that went through the model", c.tokens,
          out);
  Header("anymoe_expert_cache_stall_seconds_total", "counter",
         "time forward steps waited for expert reads", out);
  *out += "anymoe_expert_cache_stall_seconds_total " + Num(double(c.stall_ns) / 1e9) + '\n';
  Counter("anymoe_expert_cache_prefetches_total", "expert reads started ahead of need",
          c.prefetches, out);
  Counter("anymoe_expert_cache_prefetch_used_total", "prefetched experts a step then used",
          c.prefetch_used, out);
  Counter("anymoe_expert_cache_prefetch_skipped_total",
          "predicted experts not read ahead: too few such reads were used lately",
          c.prefetch_skipped, out);
  Counter("anymoe_expert_prediction_predicted_total", "experts the next-layer predictor named",
          c.predicted, out);
  Counter("anymoe_expert_prediction_correct_total", "predicted experts the layer then used",
          c.predicted_used, out);
  Counter("anymoe_sticky_expert_routings_total",
          "(token, layer) routings --sticky-experts replaced", c.sticky_tokens, out);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void Histogram::Render(std::string_view name, std::string_view help, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  Header(name, "histogram", help, out);
  const std::string n(name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    *out += n + "_bucket{le=\"" + le + "\"} " + Num(cumulative) + '\n';
  }
  *out += n + "_sum " + Num(sum_) + '\n';
  *out += n + "_count " + Num(count_) + '\n';
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      tpot_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1,
             2.5}),
      e2e_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}) {}

void ServerMetrics::CountResponse(std::string_view endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{std::string(endpoint), status}];
}

void ServerMetrics::RecordRequest(const RequestRecord& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    prompt_tokens_ += uint64_t(r.prompt_tokens);
    generated_tokens_ += uint64_t(r.generated_tokens);
    ++finished_[std::string(r.finish_reason)];
  }
  e2e_.Observe(r.e2e_seconds);
  if (r.ttft_seconds >= 0) {
    ttft_.Observe(r.ttft_seconds);
    if (r.generated_tokens > 1) {
      tpot_.Observe((r.e2e_seconds - r.ttft_seconds) / double(r.generated_tokens - 1));
    }
  }
}

std::string ServerMetrics::Render(const MetricsSnapshot& s) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Header("anymoe_http_requests_total", "counter", "HTTP responses by endpoint and status code",
           &out);
    for (const auto& [key, n] : responses_) {
      out += "anymoe_http_requests_total{endpoint=\"" + key.first + "\",code=\"" +
             std::to_string(key.second) + "\"} " + Num(n) + '\n';
    }
    Header("anymoe_requests_finished_total", "counter",
           "generation requests by finish reason (stop, length, cancelled, error)", &out);
    for (const auto& [reason, n] : finished_) {
      out += "anymoe_requests_finished_total{reason=\"" + reason + "\"} " + Num(n) + '\n';
    }
    Header("anymoe_prompt_tokens_total", "counter", "prompt tokens of finished requests", &out);
    out += "anymoe_prompt_tokens_total " + Num(prompt_tokens_) + '\n';
    Header("anymoe_generation_tokens_total", "counter", "tokens generated", &out);
    out += "anymoe_generation_tokens_total " + Num(generated_tokens_) + '\n';
  }
  ttft_.Render("anymoe_time_to_first_token_seconds",
               "time from request arrival to the first generated token", &out);
  tpot_.Render("anymoe_time_per_output_token_seconds",
               "mean time per generated token after the first, per request", &out);
  e2e_.Render("anymoe_e2e_request_latency_seconds", "time from request arrival to the last token",
              &out);

  Gauge("anymoe_ready", "1 once the model is loaded and the server accepts requests",
        int64_t(s.ready ? 1 : 0), &out);
  if (s.scheduler != nullptr) {
    const SchedulerStats& st = *s.scheduler;
    Gauge("anymoe_model_version",
          "version of the weights: live expert swaps applied since load (POST /admin/experts)",
          int64_t(s.model_version), &out);
    Gauge("anymoe_requests_running", "requests being decoded", int64_t(st.running), &out);
    Gauge("anymoe_requests_waiting", "requests queued for a slot", int64_t(st.waiting), &out);
    Gauge("anymoe_kv_cache_blocks_used", "KV cache blocks in use", st.kv_blocks_used, &out);
    Gauge("anymoe_kv_cache_blocks_total", "KV cache blocks in all", st.kv_blocks_total, &out);
    Gauge("anymoe_kv_cache_usage_ratio", "fraction of KV cache blocks in use",
          st.kv_blocks_total > 0 ? double(st.kv_blocks_used) / double(st.kv_blocks_total) : 0.0,
          &out);
    Header("anymoe_scheduler_steps_total", "counter", "batched forward steps run", &out);
    out += "anymoe_scheduler_steps_total " + Num(st.steps) + '\n';
    Header("anymoe_spec_draft_tokens_total", "counter",
           "speculative draft tokens verified (serve --spec)", &out);
    out += "anymoe_spec_draft_tokens_total " + Num(st.drafted_tokens) + '\n';
    Header("anymoe_spec_accepted_tokens_total", "counter",
           "speculative draft tokens the model agreed with", &out);
    out += "anymoe_spec_accepted_tokens_total " + Num(st.accepted_tokens) + '\n';
    Gauge("anymoe_spec_acceptance_ratio", "accepted / drafted tokens since start (0: none drafted)",
          st.drafted_tokens > 0 ? double(st.accepted_tokens) / double(st.drafted_tokens) : 0.0,
          &out);
    Header("anymoe_prefix_cache_queries_total", "counter",
           "prompt tokens of admitted requests, looked up in the prefix cache", &out);
    out += "anymoe_prefix_cache_queries_total " + Num(st.prefix_cache_queries) + '\n';
    Header("anymoe_prefix_cache_hits_total", "counter",
           "prompt tokens served from cached KV blocks (not prefilled)", &out);
    out += "anymoe_prefix_cache_hits_total " + Num(st.prefix_cache_hits) + '\n';
    Gauge("anymoe_prefix_cache_hit_ratio", "prefix_cache_hits / prefix_cache_queries since start",
          st.prefix_cache_queries > 0
              ? double(st.prefix_cache_hits) / double(st.prefix_cache_queries)
              : 0.0,
          &out);
    Gauge("anymoe_prefix_cache_blocks", "KV cache blocks holding cached prefixes (in use or free)",
          st.prefix_cache_blocks, &out);
  }
  if (s.routing != nullptr && s.routing->cache.enabled) RenderExpertCache(s.routing->cache, &out);
  if (s.routing != nullptr && !s.routing->layers.empty()) {
    Header("anymoe_expert_tokens_total", "counter",
           "tokens routed to each expert of each MoE layer since load", &out);
    const RoutingStats& r = *s.routing;
    for (size_t l = 0; l < r.layers.size() && l < r.counts.size(); ++l) {
      const std::string layer = std::to_string(r.layers[l]);
      for (size_t e = 0; e < r.counts[l].size(); ++e) {
        out += "anymoe_expert_tokens_total{layer=\"" + layer + "\",expert=\"" + std::to_string(e) +
               "\"} " + Num(r.counts[l][e]) + '\n';
      }
    }
  }
  return out;
}

}  // namespace anymoe
