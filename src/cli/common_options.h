// Options shared by several subcommands (model, threads, context, sampling) and
// the helpers that turn them into a loaded Engine.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace anymoe::cli {

void AddEngineOptions(CLI::App& cmd, EngineOptions& options);

// A flag value that must be a finite number in [lo, hi] ("nan", "inf" and
// out-of-range values are refused, naming the flag).
CLI::Validator FiniteNumber(double lo, double hi);

// --no-repack: clears `repack_weights` (see BackendOptions::repack_weights).
void AddRepackFlag(CLI::App& cmd, bool& repack_weights);

// --int16-indexer / --no-int16-indexer: set `int16_indexer` on or off (default
// kAuto; see BackendOptions::int16_indexer).
void AddInt16IndexerFlag(CLI::App& cmd, Int16Indexer& int16_indexer);

// --cpu-target NAME: the SIMD target the CPU kernels dispatch to (kernels/cpu_target.h);
// selected as the option is parsed.
void AddCpuTargetOption(CLI::App& cmd);

// --numa none|distribute|isolate: CPU threads and memory over NUMA nodes
// (core/numa.h; BackendOptions::numa).
void AddNumaOption(CLI::App& cmd, NumaMode& numa);

// --kv-type auto|f32|f16: the KV cache's keys and values (EngineOptions::kv_type;
// auto leaves it empty: the backend's default).
void AddKvTypeOption(CLI::App& cmd, std::optional<DType>& kv_type);

// --mla-form absorbed|expanded|auto (EngineOptions::mla_form).
void AddMlaFormOption(CLI::App& cmd, MlaForm& form);

// --expert-cache, --expert-policy, --no-expert-prefetch, --expert-prefetch-min-use,
// --sticky-experts
// (see runtime/expert_streaming.h).
void AddExpertOptions(CLI::App& cmd, ExpertStreamingOptions& experts);

// --expert-prune PROFILE:KEEP, --prune-by saliency|count (runtime/expert_pruning.h).
void AddPruneOptions(CLI::App& cmd, ExpertPruneOptions& prune);

// --spec none|ngram[|mtp], --draft N and --draft-min-accept F
// (runtime/speculative.h); `spec` holds the defaults.
void AddSpecOptions(CLI::App& cmd, SpeculativeOptions& spec, bool allow_mtp = true);

// --ep, --ep-placement FILE, --ep-timeout SECONDS (run and bench; see
// docs/distributed.md). Started by mpirun with 2 or more ranks, --ep is implied.
void AddExpertParallelOptions(CLI::App& cmd, ExpertParallelOptions& ep);

// An error when mpirun started this process with other ranks: `command` does
// not run under expert parallelism yet (run and bench do).
Status SingleProcessOnly(const char* command);

struct SamplingFlags {
  SamplingParams params;
  std::optional<uint64_t> seed;  // absent: a random seed
  SamplingParams Resolve() const;
};
void AddSamplingOptions(CLI::App& cmd, SamplingFlags& flags);

// Loads the engine, or prints the one-line error and returns null.
std::unique_ptr<Engine> LoadEngineOrReport(const EngineOptions& options);

// Prints "anymoe: error: <message>" to stderr; returns the exit code 1. Under
// expert parallelism with other ranks, ends the whole MPI job instead (they
// would otherwise wait for this rank until their timeout).
int ReportError(const Status& status);

// Texts read whole (perplexity's, bench-serve's prompt) are at most this long.
constexpr uint64_t kMaxTextBytes = uint64_t(1) << 30;
// The whole file at `path` (at most kMaxTextBytes), or an error naming it.
Expected<std::string> ReadText(const std::string& path);

}  // namespace anymoe::cli
