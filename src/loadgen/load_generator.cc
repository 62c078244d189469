#include "loadgen/load_generator.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "loadgen/sse_reader.h"
#include "loadgen/workload.h"

namespace anymoe {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Target {
  std::string base;  // scheme://host:port
  std::string path;  // prefix + endpoint
};

Expected<Target> ParseUrl(const std::string& url, const std::string& endpoint) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return Status::Error("--url " + url + ": expected http://HOST:PORT or https://HOST:PORT");
  }
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return Status::Error("--url " + url + ": the scheme must be http or https");
  }
  const size_t host_start = scheme_end + 3;
  const size_t slash = url.find('/', host_start);
  Target t;
  t.base = url.substr(0, slash);
  if (t.base.size() <= host_start) return Status::Error("--url " + url + ": no host");
  std::string prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  // Accept ".../v1" as well as the server root.
  if (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0 &&
      endpoint.rfind("/v1/", 0) == 0) {
    prefix.resize(prefix.size() - 3);
  }
  t.path = prefix + endpoint;
  return t;
}

// The error message inside an OpenAI-style error body, or the body itself, cut short.
std::string ErrorText(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 200);
}

}  // namespace

double BenchServeReport::cost_per_million_output() const {
  if (options.price_per_hour < 0 || output_throughput() <= 0) return -1;
  return options.price_per_hour / (output_throughput() * 3600.0) * 1e6;
}

RequestResult StreamOneRequest(httplib::Client& client, const std::string& path,
                               const BenchServeOptions& options, const std::string& prompt) {
  json body = {{"prompt", prompt},
               {"max_tokens", options.output_len},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!options.model.empty()) body["model"] = options.model;
  if (options.ignore_eos) body["ignore_eos"] = true;

  RequestResult r;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (!options.api_key.empty()) req.set_header("Authorization", "Bearer " + options.api_key);

  int status = 0;
  std::string error_body;
  SseReader sse;
  bool done = false;
  std::optional<Clock::time_point> last_chunk;
  const Clock::time_point sent = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(n, 4096));
      return true;
    }
    sse.Feed(std::string_view(data, n), [&](std::string_view payload) {
      if (payload == "[DONE]") {
        done = true;
        return;
      }
      const json event = json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (!event.is_object()) return;
      if (event.contains("error")) {
        r.error = "stream error: " + ErrorText(std::string(payload));
        return;
      }
      if (event.contains("usage") && event["usage"].is_object()) {
        const json& u = event["usage"];
        if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
          r.output_tokens = u["completion_tokens"].get<int64_t>();
        }
        if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
          r.prompt_tokens = u["prompt_tokens"].get<int64_t>();
        }
      }
      if (!event.contains("choices") || !event["choices"].is_array() || event["choices"].empty()) {
        return;
      }
      const json& choice = event["choices"][0];
      std::string text;
      if (choice.contains("text") && choice["text"].is_string()) {
        text = choice["text"].get<std::string>();
      } else if (choice.contains("delta") && choice["delta"].is_object() &&
                 choice["delta"].contains("content") && choice["delta"]["content"].is_string()) {
        text = choice["delta"]["content"].get<std::string>();
      }
      if (text.empty()) return;
      const Clock::time_point now = Clock::now();
      if (!last_chunk) {
        r.ttft = Seconds(now - sent);
      } else {
        r.itl.push_back(Seconds(now - *last_chunk));
      }
      last_chunk = now;
      ++r.chunks;
    });
    return true;
  };

  const httplib::Result result = client.send(req);
  r.e2e = Seconds(Clock::now() - sent);
  if (!result) {
    r.error = "request failed: " + httplib::to_string(result.error());
    return r;
  }
  if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + ErrorText(error_body);
    return r;
  }
  if (!r.error.empty()) return r;
  if (!done) {
    r.error = "the stream ended without data: [DONE]";
    return r;
  }
  if (r.output_tokens == 0) r.output_tokens = r.chunks;
  if (r.chunks == 0) r.ttft = r.e2e;
  r.ok = true;
  return r;
}

Expected<BenchServeReport> RunLoad(const BenchServeOptions& o) {
  ASSIGN_OR_RETURN(Target target, ParseUrl(o.url, o.endpoint));
  if (o.num_prompts < 1) return Status::Error("--num-prompts must be at least 1");
  if (o.concurrency < 1) return Status::Error("--concurrency must be at least 1");
  if (o.input_len < 1 || o.output_len < 1) {
    return Status::Error("--input-len and --output-len must be at least 1");
  }
  const std::vector<std::string> prompts =
      o.prompt_text.empty() ? RandomPrompts(o.num_prompts, o.input_len, o.seed)
                            : std::vector<std::string>(size_t(o.num_prompts), o.prompt_text);
  const std::vector<double> arrivals = PoissonArrivals(o.num_prompts, o.qps, o.seed);
  std::vector<RequestResult> results(size_t(o.num_prompts));

  std::atomic<int> next{0}, in_flight{0}, max_in_flight{0};
  const Clock::time_point start = Clock::now();
  auto worker = [&] {
    httplib::Client client(target.base);
    // A connection per request: reusing one that the server has just closed
    // (llama-server ends a keep-alive connection after a few requests) failed
    // 19-25 of 200 requests with "Read" errors, counted against the server.
    // On the loopback a connect costs ~0.1 ms, inside every TTFT alike.
    client.set_keep_alive(false);
    client.set_connection_timeout(10);
    client.set_read_timeout(o.timeout_seconds);
    client.set_write_timeout(o.timeout_seconds);
    for (;;) {
      const int i = next.fetch_add(1);
      if (i >= o.num_prompts) return;
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrivals[i])));
      const int now_in_flight = in_flight.fetch_add(1) + 1;
      int seen = max_in_flight.load();
      while (now_in_flight > seen && !max_in_flight.compare_exchange_weak(seen, now_in_flight)) {
      }
      results[size_t(i)] = StreamOneRequest(client, target.path, o, prompts[size_t(i)]);
      in_flight.fetch_sub(1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min(o.concurrency, o.num_prompts); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();

  BenchServeReport report;
  report.options = o;
  report.duration = Seconds(Clock::now() - start);
  report.max_in_flight = max_in_flight.load();
  std::vector<double> ttft, tpot, itl, e2e;
  for (size_t i = 0; i < results.size(); ++i) {
    const RequestResult& r = results[i];
    if (!r.ok) {
      ++report.failed;
      if (report.errors.size() < 5) report.errors.push_back(r.error);
      continue;
    }
    ++report.completed;
    report.output_tokens += r.output_tokens;
    if (r.prompt_tokens >= 0) {
      report.input_tokens += r.prompt_tokens;
    } else {
      report.input_tokens += o.input_len;
      report.input_tokens_estimated = true;
    }
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / double(r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  report.ttft = Summarize(std::move(ttft));
  report.tpot = Summarize(std::move(tpot));
  report.itl = Summarize(std::move(itl));
  report.e2e = Summarize(std::move(e2e));
  return report;
}

std::string ReportTable(const BenchServeReport& r) {
  std::string out;
  char line[160];
  auto row = [&](const char* label, const char* fmt, auto value) {
    char v[64];
    std::snprintf(v, sizeof(v), fmt, value);
    std::snprintf(line, sizeof(line), "%-42s %14s\n", label, v);
    out += line;
  };
  auto rule = [&](const char* title) {
    std::string t = std::string(" ") + title + " ";
    const size_t width = 57;
    const size_t left = (width - std::min(width, t.size())) / 2;
    out += std::string(left, '-') + t + std::string(width - left - std::min(width, t.size()), '-') +
           '\n';
  };
  auto latency = [&](const char* name, const LatencySummary& s) {
    rule(name);
    const std::string n = name;
    const std::string abbrev = n == "Time to First Token"     ? "TTFT"
                               : n == "Time per Output Token" ? "TPOT"
                               : n == "Inter-token Latency"   ? "ITL"
                                                              : "E2E";
    row(("Mean " + abbrev + " (ms):").c_str(), "%.2f", s.mean * 1e3);
    row(("Median " + abbrev + " (ms):").c_str(), "%.2f", s.median * 1e3);
    row(("P90 " + abbrev + " (ms):").c_str(), "%.2f", s.p90 * 1e3);
    row(("P99 " + abbrev + " (ms):").c_str(), "%.2f", s.p99 * 1e3);
  };
  out += std::string(17, '=') + " Serving Benchmark Result " + std::string(14, '=') + '\n';
  row("Successful requests:", "%d", r.completed);
  row("Failed requests:", "%d", r.failed);
  row("Maximum requests in flight:", "%d", r.max_in_flight);
  row("Benchmark duration (s):", "%.2f", r.duration);
  row(r.input_tokens_estimated ? "Total input tokens (estimated):" : "Total input tokens:", "%lld",
      static_cast<long long>(r.input_tokens));
  row("Total generated tokens:", "%lld", static_cast<long long>(r.output_tokens));
  row("Request throughput (req/s):", "%.2f", r.request_throughput());
  row("Output token throughput (tok/s):", "%.2f", r.output_throughput());
  row("Total token throughput (tok/s):", "%.2f", r.total_throughput());
  if (r.cost_per_million_output() >= 0) {
    row("Cost per million output tokens ($):", "%.4f", r.cost_per_million_output());
  }
  latency("Time to First Token", r.ttft);
  latency("Time per Output Token", r.tpot);
  latency("Inter-token Latency", r.itl);
  latency("End-to-end Latency", r.e2e);
  out += std::string(57, '=') + '\n';
  for (const std::string& e : r.errors) out += "error: " + e + '\n';
  return out;
}

json ReportJson(const BenchServeReport& r) {
  auto ms = [](const LatencySummary& s) {
    return json{{"mean", s.mean * 1e3}, {"median", s.median * 1e3}, {"p90", s.p90 * 1e3},
                {"p99", s.p99 * 1e3},   {"max", s.max * 1e3},       {"count", s.count}};
  };
  const BenchServeOptions& o = r.options;
  json j = {
      {"url", o.url},
      {"endpoint", o.endpoint},
      {"num_prompts", o.num_prompts},
      {"qps", o.qps > 0 && std::isfinite(o.qps) ? json(o.qps) : json("inf")},
      {"concurrency", o.concurrency},
      {"input_len", o.input_len},
      {"prompt_text", !o.prompt_text.empty()},
      {"output_len", o.output_len},
      {"ignore_eos", o.ignore_eos},
      {"seed", o.seed},
      {"duration_s", r.duration},
      {"completed", r.completed},
      {"failed", r.failed},
      {"errors", r.errors},
      {"max_in_flight", r.max_in_flight},
      {"total_input_tokens", r.input_tokens},
      {"input_tokens_estimated", r.input_tokens_estimated},
      {"total_output_tokens", r.output_tokens},
      {"request_throughput", r.request_throughput()},
      {"output_throughput", r.output_throughput()},
      {"total_token_throughput", r.total_throughput()},
      {"ttft_ms", ms(r.ttft)},
      {"tpot_ms", ms(r.tpot)},
      {"itl_ms", ms(r.itl)},
      {"e2e_ms", ms(r.e2e)},
  };
  if (o.price_per_hour >= 0) {
    j["price_per_hour"] = o.price_per_hour;
    j["cost_per_million_output_tokens"] =
        r.cost_per_million_output() >= 0 ? json(r.cost_per_million_output()) : json(nullptr);
  }
  return j;
}

}  // namespace anymoe
