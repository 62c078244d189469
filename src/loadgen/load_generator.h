// bench-serve's load generator: streams completion requests to an
// OpenAI-compatible server (anymoe serve, llama-server, vLLM) with Poisson
// arrivals at a fixed rate and a cap on requests in flight, timing each
// streamed chunk, and summarises throughput, TTFT, TPOT, inter-token latency
// and end-to-end latency.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/latency_summary.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace anymoe {

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8080";  // scheme://host:port[/prefix]
  std::string endpoint = "/v1/completions";
  int num_prompts = 100;
  double qps = 0;        // requests per second; <= 0 or inf: all at once
  int concurrency = 8;   // most requests in flight
  int input_len = 128;   // prompt length in words (about tokens)
  // Every request's prompt, when not empty (a repetitive workload, e.g. a
  // rewrite task for speculative decoding); else random words of input_len.
  std::string prompt_text;
  int output_len = 128;  // max_tokens
  bool ignore_eos = false;
  uint64_t seed = 0;
  std::string model;  // "model" field; "" leaves it out
  std::string api_key;
  double price_per_hour = -1;  // machine cost in $/h; < 0: not reported
  int timeout_seconds = 600;   // per request
};

// One request as the client saw it.
struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft = 0;             // seconds from send to the first text chunk
  double e2e = 0;              // seconds from send to the end of the stream
  std::vector<double> itl;     // seconds between consecutive text chunks
  int64_t prompt_tokens = -1;  // from usage; -1 when the server sent none
  int64_t output_tokens = 0;   // usage, else the number of text chunks
  int64_t chunks = 0;
};

struct BenchServeReport {
  BenchServeOptions options;
  double duration = 0;  // seconds, first send to last response
  int completed = 0, failed = 0;
  std::vector<std::string> errors;  // the first few, for the report
  int64_t input_tokens = 0, output_tokens = 0;
  bool input_tokens_estimated = false;  // some responses had no usage
  int max_in_flight = 0;
  LatencySummary ttft, tpot, itl, e2e;  // seconds
  double request_throughput() const { return duration > 0 ? completed / duration : 0; }
  double output_throughput() const { return duration > 0 ? output_tokens / duration : 0; }
  double total_throughput() const {
    return duration > 0 ? (input_tokens + output_tokens) / duration : 0;
  }
  // $ per million output tokens at price_per_hour; < 0 when not priced.
  double cost_per_million_output() const;
};

// Runs the whole benchmark. Errors only for bad options (a bad URL); failed
// requests are counted in the report.
Expected<BenchServeReport> RunLoad(const BenchServeOptions& options);

std::string ReportTable(const BenchServeReport& report);
nlohmann::json ReportJson(const BenchServeReport& report);

// One streamed completion request on `client` to `path` (used by RunLoad;
// exposed for tests).
RequestResult StreamOneRequest(httplib::Client& client, const std::string& path,
                               const BenchServeOptions& options, const std::string& prompt);

}  // namespace anymoe
