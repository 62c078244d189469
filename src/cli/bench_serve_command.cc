// `anymoe bench-serve`: load-tests an OpenAI-compatible server (anymoe serve,
// llama-server, vLLM) with streamed /v1/completions requests and reports
// throughput, TTFT, TPOT, ITL and end-to-end latency; the work is in
// src/loadgen/, this file is flags and printing.
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "loadgen/load_generator.h"

namespace anymoe::cli {
namespace {

struct BenchServeFlags {
  BenchServeOptions load;
  std::string qps = "inf";
  std::string output = "table";
  std::string prompt_file;
};

Expected<double> ParseQps(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return 0.0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0) {
    return Status::Error("--qps " + s + ": expected a positive number or inf");
  }
  return v;
}

int BenchServe(BenchServeFlags& f) {
  auto qps = ParseQps(f.qps);
  if (!qps.ok()) return ReportError(qps.status());
  f.load.qps = *qps;
  if (!f.prompt_file.empty()) {
    auto text = ReadText(f.prompt_file);
    if (!text.ok()) return ReportError(text.status());
    if (text->empty()) return ReportError(Status::Error("--prompt-file " + f.prompt_file + " is empty"));
    f.load.prompt_text = std::move(*text);
  }
  auto report = RunLoad(f.load);
  if (!report.ok()) return ReportError(report.status());
  if (f.output == "json") {
    std::printf("%s\n", ReportJson(*report).dump(2).c_str());
  } else {
    std::printf("%s", ReportTable(*report).c_str());
  }
  // Failed requests are results, not a failure of the tool; all failing is.
  return report->completed > 0 ? 0 : 1;
}

}  // namespace

CommandFn RegisterBenchServe(CLI::App& cmd) {
  auto f = std::make_shared<BenchServeFlags>();
  BenchServeOptions& o = f->load;
  cmd.add_option("--url", o.url, "server base URL, e.g. http://127.0.0.1:8080");
  cmd.add_option("--endpoint", o.endpoint, "completions path");
  cmd.add_option("--num-prompts", o.num_prompts, "requests to send")->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--qps", f->qps, "request rate of the Poisson arrivals, or inf (all at once)");
  cmd.add_option("--concurrency", o.concurrency, "most requests in flight")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--input-len", o.input_len, "prompt length in words (about tokens)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--prompt-file", f->prompt_file,
                 "send this file's text as every request's prompt (instead of --input-len "
                 "random words)");
  cmd.add_option("--output-len", o.output_len, "max_tokens of each request")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--price-per-hour", o.price_per_hour,
                 "machine price in $/hour, to report $ per million output tokens")
      ->check(CLI::Range(0.0, 1e9));
  cmd.add_flag("--ignore-eos", o.ignore_eos, "send ignore_eos: generate all --output-len tokens");
  cmd.add_option("--seed", o.seed, "seed of prompts and arrival times");
  cmd.add_option("--model", o.model, "\"model\" field of each request");
  cmd.add_option("--api-key", o.api_key, "sent as Authorization: Bearer KEY");
  cmd.add_option("--timeout", o.timeout_seconds, "seconds per request before it counts as failed")
      ->check(CLI::Range(1, 86400));
  cmd.add_option("-o,--output", f->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  return [f] { return BenchServe(*f); };
}

}  // namespace anymoe::cli
