// Bench results as text: llama-bench's markdown table and its JSON array (same
// field names and types, so scripts written for llama-bench read ours), plus
// the decode roofline when memory bandwidth was measured.
#pragma once

#include <span>
#include <string>

#include "bench/bench_result.h"
#include "bench/membw.h"

namespace anymoe {

// "| model | size | params | backend | threads | test | t/s |" and its rule.
std::string MarkdownHeader();
// One table row: t/s as "mean ± sd".
std::string MarkdownRow(const BenchResult& r);

// The bandwidth line(s) and a table of the tg results that carry a roofline:
// weights read per token (and the formula's terms), the bandwidth-bound t/s,
// the measured t/s and its percentage of the bound.
std::string MarkdownRoofline(std::span<const MembwResult> bandwidths,
                             std::span<const BenchResult> results);

// With streamed experts: per test, the expert cache's hit rate, bytes read and
// stall per token, and the prefetch predictor's precision and recall.
std::string MarkdownExpertCache(std::span<const BenchResult> results);

// With --op-profile: the test's ops by time per run, and their share of it.
std::string MarkdownOpProfile(const BenchResult& r);

// A JSON array of one object per result, llama-bench's fields first, then
// "backend"; on tg results with a roofline, "membw_gbs",
// "decode_bytes_per_token", "roofline_ts" and "roofline_pct"; with
// --op-profile, "op_profile"; with streamed experts, "expert_cache".
std::string JsonReport(std::span<const BenchResult> results, const std::string& cpu_info);

// "1.23 GiB" / "85.77 MiB" / "2.00 KiB" (binary units).
std::string FormatBytes(double bytes);

}  // namespace anymoe
