#include "bench/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/routing_report.h"

namespace anymoe {
namespace {

std::string Printf(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

std::string SizeCell(uint64_t bytes) {
  const double mib = double(bytes) / (1 << 20);
  return mib < 1024 ? Printf("%.2f MiB", mib) : Printf("%.2f GiB", mib / 1024);
}

std::string ParamsCell(int64_t n) {
  return n < 1000000000 ? Printf("%.2f M", double(n) / 1e6) : Printf("%.2f B", double(n) / 1e9);
}

}  // namespace

std::string FormatBytes(double bytes) {
  if (bytes >= double(1 << 30)) return Printf("%.2f GiB", bytes / double(1 << 30));
  if (bytes >= double(1 << 20)) return Printf("%.2f MiB", bytes / double(1 << 20));
  return Printf("%.2f KiB", bytes / 1024);
}

// Column widths are llama-bench's (negative: left-aligned).
std::string MarkdownHeader() {
  return "| model                          |       size |     params | backend    | threads |"
         "            test |                  t/s |\n"
         "| ------------------------------ | ---------: | ---------: | ---------- | ------: |"
         " --------------: | -------------------: |\n";
}

std::string MarkdownRow(const BenchResult& r) {
  const std::vector<double> ts = r.samples_ts();
  // "±" is two bytes in UTF-8, so the column is one byte wider.
  const std::string tps = Printf("%.2f ± %.2f", Mean(ts), SampleStddev(ts));
  return Printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %21s |\n", r.model.type.c_str(),
                SizeCell(r.model.size_bytes).c_str(), ParamsCell(r.model.n_params).c_str(),
                r.backend.c_str(), r.threads, r.test.Name().c_str(), tps.c_str());
}

std::string MarkdownRoofline(std::span<const MembwResult> bandwidths,
                             std::span<const BenchResult> results) {
  std::string out;
  for (const MembwResult& m : bandwidths) {
    out += Printf(
        "memory bandwidth (read, %d thread%s, %s buffer x %zu passes): best %.2f GB/s, "
        "median %.2f GB/s\n",
        m.threads, m.threads == 1 ? "" : "s", FormatBytes(double(m.buffer_bytes)).c_str(),
        m.pass_gbs.size(), m.best_gbs(), m.median_gbs());
  }
  std::string rows;
  std::string last_model;
  for (const BenchResult& r : results) {
    if (!r.roofline) continue;
    const DecodeBytes& b = r.roofline->bytes;
    if (r.model.filename != last_model) {
      last_model = r.model.filename;
      out += Printf("%s: weights read per token = other %s + %s %s", r.model.type.c_str(),
                    FormatBytes(double(b.other)).c_str(),
                    b.tied_embeddings ? "tied embedding/head" : "embedding row",
                    FormatBytes(double(b.tied_embeddings ? b.embedding : b.embedding_row)).c_str());
      if (b.num_experts > 0) {
        out += Printf(" + routed experts %s x %lld/%lld",
                      FormatBytes(double(b.routed_experts)).c_str(), (long long)b.experts_per_token,
                      (long long)b.num_experts);
      }
      out += " = " + FormatBytes(b.per_token()) + "\n";
    }
    const Roofline roof = r.roofline->roofline();
    const double tps = Mean(r.samples_ts());
    rows +=
        Printf("| %-30s | %7d | %15s | %12s | %10.2f | %10.2f | %9.1f %% |\n", r.model.type.c_str(),
               r.threads, r.test.Name().c_str(), FormatBytes(roof.bytes_per_token).c_str(),
               roof.bound_tps(), tps, roof.percent_of_bound(tps));
  }
  if (rows.empty()) return out;
  out +=
      "\n| model                          | threads |            test |  bytes/token |"
      "  bound t/s |        t/s | % of bound |\n"
      "| ------------------------------ | ------: | --------------: | -----------: |"
      " ---------: | ---------: | ---------: |\n";
  return out + rows;
}

std::string MarkdownExpertCache(std::span<const BenchResult> results) {
  std::string rows;
  for (const BenchResult& r : results) {
    const ExpertCacheStats& c = r.expert_cache;
    if (!c.enabled) continue;
    // Reads started ahead, the share of them used, and predicted experts the
    // prefetch gate left unread.
    const std::string ahead = c.prefetches == 0
                                  ? "0"
                                  : Printf("%llu (%.0f %%)", (unsigned long long)c.prefetches,
                                           100.0 * double(c.prefetch_used) / double(c.prefetches));
    rows += Printf(
        "| %-30s | %15s | %4s | %8lld | %10s | %7.1f %% | %11s | %8.3f | %7.1f %% | %7.1f %% | "
        "%17s | %9llu |\n",
        r.model.type.c_str(), r.test.Name().c_str(), c.policy.c_str(), (long long)c.slots,
        FormatBytes(double(c.capacity_bytes)).c_str(), 100 * c.hit_rate(),
        FormatBytes(c.bytes_per_token()).c_str(), c.stall_ms_per_token(),
        100 * c.prediction_precision(), 100 * c.prediction_recall(), ahead.c_str(),
        (unsigned long long)c.prefetch_skipped);
  }
  if (rows.empty()) return rows;
  const bool device = std::any_of(results.begin(), results.end(),
                                  [](const BenchResult& r) { return r.expert_cache.device; });
  return std::string(device ? "device expert cache (timed runs; bytes/token uploaded):\n\n"
                            : "expert cache (timed runs):\n\n") +
         "| model                          |            test | pol. |    slots |      cache |"
         "  hit rate | bytes/token | stall ms/t | pred. prec | pred. rec | read ahead (used) |"
         "   skipped |\n"
         "| ------------------------------ | --------------: | ---- | -------: | ---------: |"
         " -------: | ----------: | -------: | -------: | -------: | ------------: | -------: |\n" +
         rows;
}

std::string MarkdownOpProfile(const BenchResult& r) {
  std::vector<double> ns(r.samples_ns.begin(), r.samples_ns.end());
  const double run_ms = Mean(ns) / 1e6;
  double ops_ms = 0, launches = 0, transfers = 0;
  for (const OpProfileEntry& e : r.op_profile) {
    ops_ms += e.ms;
    launches += e.launches;
    transfers += e.transfers;
  }
  auto percent = [&](double ms) { return run_ms > 0 ? 100 * ms / run_ms : 0.0; };
  std::string out =
      Printf("ops of %s, %s, per run: %.3f ms in ops of %.3f ms (%.1f %%)\n",
             r.model.type.c_str(), r.test.Name().c_str(), ops_ms, run_ms, percent(ops_ms));
  // A tg test's run is n_gen forward steps (of n_parallel tokens each).
  const double steps = r.test.n_prompt == 0 && r.test.n_gen > 0 ? double(r.test.n_gen) : 0;
  out += Printf("device launches per run: %.0f, host<->device copies: %.0f", launches, transfers);
  if (steps > 0) {
    out += Printf("; per decode step: %.1f launches, %.1f copies", launches / steps,
                  transfers / steps);
  }
  out +=
      "\n\n"
      "| op                         | dtype |      calls |         ms | % of run |   launches |"
      "     copies |\n"
      "| -------------------------- | ----- | ---------: | ---------: | -------: | ---------: |"
      " ---------: |\n";
  for (const OpProfileEntry& e : r.op_profile) {
    out += Printf("| %-26s | %-5s | %10.1f | %10.3f | %8.1f | %10.1f | %10.1f |\n", e.op.c_str(),
                  e.dtype.c_str(), e.calls, e.ms, percent(e.ms), e.launches, e.transfers);
  }
  return out;
}

std::string JsonReport(std::span<const BenchResult> results, const std::string& cpu_info) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const BenchResult& r : results) {
    std::vector<double> ns(r.samples_ns.begin(), r.samples_ns.end());
    const std::vector<double> ts = r.samples_ts();
    nlohmann::ordered_json o;
    o["build_commit"] = "unknown";
    o["build_number"] = 0;
    o["cpu_info"] = cpu_info;
    o["gpu_info"] = r.device;
    o["backends"] = r.backend == "cuda" ? "CUDA" : r.backend == "opencl" ? "OpenCL" : "CPU";
    o["model_filename"] = r.model.filename;
    o["model_type"] = r.model.type;
    o["model_size"] = r.model.size_bytes;
    o["model_n_params"] = r.model.n_params;
    o["n_batch"] = r.batch;
    o["n_ubatch"] = r.batch;
    o["n_threads"] = r.threads;
    o["type_k"] = r.kv_type;
    o["type_v"] = r.kv_type;
    o["n_gpu_layers"] = r.device_layers;
    o["n_cpu_moe"] = r.cpu_moe_layers;  // llama-bench's name
    o["n_prompt"] = r.test.n_prompt;
    o["n_gen"] = r.test.n_gen;
    o["n_parallel"] = r.test.n_parallel;
    o["n_depth"] = r.test.n_depth;
    if (r.test.index_topk > 0) o["index_topk"] = r.test.index_topk;
    if (!r.test.spec.empty()) {
      o["spec"] = r.test.spec;
      o["n_draft"] = r.test.n_draft;
      o["n_drafted"] = r.drafted;
      o["n_accepted"] = r.accepted;
    }
    o["test_time"] = r.test_time;
    o["avg_ns"] = uint64_t(Mean(ns) + 0.5);
    o["stddev_ns"] = uint64_t(SampleStddev(ns) + 0.5);
    o["avg_ts"] = Mean(ts);
    o["stddev_ts"] = SampleStddev(ts);
    o["samples_ns"] = r.samples_ns;
    o["samples_ts"] = ts;
    o["backend"] = r.backend;
    if (!r.op_profile.empty()) {
      nlohmann::ordered_json ops = nlohmann::ordered_json::array();
      for (const OpProfileEntry& e : r.op_profile) {
        ops.push_back({{"op", e.op},
                       {"dtype", e.dtype},
                       {"calls", e.calls},
                       {"ms", e.ms},
                       {"launches", e.launches},
                       {"transfers", e.transfers}});
      }
      o["op_profile"] = ops;  // per timed run
    }
    if (r.expert_cache.enabled) {
      o["expert_cache"] = ExpertCacheJson(r.expert_cache);  // over all timed runs
    }
    if (r.roofline) {
      const Roofline roof = r.roofline->roofline();
      o["membw_gbs"] = roof.bandwidth_gbs;
      o["decode_bytes_per_token"] = roof.bytes_per_token;
      o["roofline_ts"] = roof.bound_tps();
      o["roofline_pct"] = roof.percent_of_bound(Mean(ts));
    }
    array.push_back(std::move(o));
  }
  return array.dump(2) + "\n";
}

}  // namespace anymoe
