#include "cli/common_options.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "backends/cpu/kernels/cpu_target.h"
#include "models/mtp_block.h"

namespace anymoe::cli {

void AddEngineOptions(CLI::App& cmd, EngineOptions& o) {
  cmd.add_option("-m,--model", o.model_path, "GGUF file or HF model folder")->required();
  cmd.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)");
  // A context needs room for a prompt token and a generated one.
  cmd.add_option("-c,--ctx", o.context, "context length in tokens (capped by the model)")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 24));
  cmd.add_option("--backend", o.backend, "compute backend")
      ->check(CLI::IsMember(AvailableBackends()));
  cmd.add_option("--device", o.device, "device index of a device backend (see anymoe doctor)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--mem-budget", o.mem_budget,
                 "device memory to reserve in bytes (0: exactly what the model plans to need)");
  cmd.add_option("--chat-template", o.chat_template,
                 "use a built-in chat renderer (chatml, glm, llama3) instead of the model's own "
                 "Jinja template");
  cmd.add_option("--batch", o.max_step_tokens, "prompt tokens per forward step")
      ->check(CLI::Range(1, 4096));
  cmd.add_flag("--exact", o.exact_matmul,
               "keep activations in f32 in every matmul (slower; closest to the f32 reference)");
  AddRepackFlag(cmd, o.repack_weights);
  AddInt16IndexerFlag(cmd, o.int16_indexer);
  AddKvTypeOption(cmd, o.kv_type);
  AddMlaFormOption(cmd, o.mla_form);
  AddCpuTargetOption(cmd);
  cmd.add_flag("--mtp", o.load_mtp,
               "also load the model's NextN / MTP layer (speculative decoding: --spec mtp)");
  cmd.add_option("--mtp-file", o.mtp_path,
                 "load the MTP layer from this MTP-only GGUF (beside a trunk-only -m file)");
  AddExpertOptions(cmd, o.experts);
  cmd.add_option("--expert-profile", o.warm_start.profile,
                 "warm start: read the experts this profile (anymoe profile) used most into the "
                 "expert cache at start, in the background");
  cmd.add_option("--pin-experts", o.warm_start.pin_percent,
                 "with --expert-profile: pin the profile's hottest PCT % of the expert cache's "
                 "slots against eviction (at most 50)")
      ->check(CLI::Range(0.0, 50.0));
  AddPruneOptions(cmd, o.prune);
  AddNumaOption(cmd, o.numa);
}

void AddPruneOptions(CLI::App& cmd, ExpertPruneOptions& prune) {
  cmd.add_option("--expert-prune", prune.spec,
                 "PROFILE.json:KEEP: load only the KEEP experts per layer (a count, or a share "
                 "like 50%) that rank first in this expert profile (anymoe profile); the others "
                 "are never loaded nor routed to. Changes the outputs: see "
                 "docs/expert-profiles.md");
  cmd.add_option_function<std::string>(
         "--prune-by",
         [&prune](const std::string& name) {
           auto r = ParsePruneRanking(name);
           if (!r.ok()) throw CLI::ValidationError(r.status().message());
           prune.ranking = *r;
         },
         "rank experts for --expert-prune by saliency (REAP: router weight x output norm) or "
         "count (tokens routed)")
      ->default_str("saliency");
}

void AddNumaOption(CLI::App& cmd, NumaMode& numa) {
  cmd.add_option_function<std::string>(
         "--numa",
         [&numa](const std::string& name) { numa = NumaModeFromName(name).value_or(numa); },
         "CPU threads and memory over NUMA nodes: none (the OS places them), distribute "
         "(threads pinned one per core across all nodes, memory interleaved), isolate "
         "(threads pinned to the cores of the node anymoe starts on, memory preferred "
         "there). On one node distribute and isolate both pin one thread per core")
      ->check(CLI::IsMember({"none", "distribute", "isolate"}))
      ->default_str("none");
}

void AddCpuTargetOption(CLI::App& cmd) {
  std::string names = "best";
  for (const kernels::CpuTarget& t : kernels::AvailableCpuTargets()) names += ", " + t.name;
  cmd.add_option_function<std::string>(
         "--cpu-target",
         [](const std::string& name) {
           if (Status st = kernels::SelectCpuTarget(name); !st.ok()) {
             throw CLI::ValidationError(st.message());
           }
         },
         "SIMD target of the CPU kernels (to compare targets on one machine): " + names)
      ->default_str("best");
}

void AddExpertOptions(CLI::App& cmd, ExpertStreamingOptions& x) {
  cmd.add_option("--expert-cache", x.cache,
                 "stream routed experts from disk through a RAM cache of SIZE bytes (K/M/G "
                 "suffixes) or PCT% of the routed-expert bytes; off: every weight resident; "
                 "auto: stream only when the model does not fit the available memory")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--expert-policy",
         [&x](const std::string& name) { x.policy = *ParseEvictionPolicy(name); },
         "expert cache eviction: lru, lfu, or lfru (frequency decayed by recency)")
      ->check(CLI::IsMember({"lru", "lfu", "lfru"}))
      ->default_str(std::string(EvictionPolicyName(x.policy)));
  cmd.add_flag_callback(
      "--no-expert-prefetch", [&x] { x.prefetch = false; },
      "do not load the experts predicted for the next layer ahead of need");
  cmd.add_option("--expert-prefetch-min-use", x.prefetch_min_use,
                 "read predicted experts ahead only while at least this share of such reads "
                 "was used lately (0: always; the predictions are judged either way)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--sticky-experts", x.sticky,
                 "in one-token steps, reuse the previous token's experts when the router's "
                 "margin is below THRESHOLD (changes the output; 0: off)")
      ->check(CLI::Range(0.0f, 1e30f));
  // llama.cpp's names for the same placement.
  cmd.add_flag_callback(
      "--cpu-moe", [&x] { x.cpu_moe_layers = std::numeric_limits<int64_t>::max(); },
      "on a device backend, keep every MoE layer's routed experts in RAM and run them on the "
      "CPU (attention, shared experts and the rest on the device)");
  cmd.add_option("--n-cpu-moe", x.cpu_moe_layers,
                 "like --cpu-moe for the routed experts of the first N layers only")
      ->check(CLI::NonNegativeNumber);
}

void AddExpertParallelOptions(CLI::App& cmd, ExpertParallelOptions& ep) {
  ep.enabled = MpiLaunchSize() > 1;
  cmd.add_flag("--ep", ep.enabled,
               "expert parallelism: spread the routed experts over the ranks of the MPI job "
               "(mpirun -np N anymoe ...); implied under mpirun with 2 or more ranks");
  cmd.add_option("--ep-placement", ep.placement,
                 "JSON file giving each MoE layer's expert -> rank (default: contiguous ranges; "
                 "see tools/ep_placement.py)");
  cmd.add_option("--ep-timeout", ep.timeout_s,
                 "seconds to wait for the other ranks in one exchange before giving up")
      ->check(FiniteNumber(0.001, 86400))
      ->capture_default_str();
  cmd.add_flag("--ep-overlap,!--ep-no-overlap", ep.overlap,
               "compute the shared expert while the routed experts' outputs travel (default); "
               "--ep-no-overlap waits for them first, to measure what overlapping gains");
}

Status SingleProcessOnly(const char* command) {
  if (MpiLaunchSize() < 2) return Status::Ok();
  return Status::Error(std::string("anymoe ") + command +
                       " runs as one process: under mpirun, "
                       "expert parallelism is supported by run, bench and serve");
}

CLI::Validator FiniteNumber(double lo, double hi) {
  // CLI::Range compares, and every comparison with NaN is false: "nan" would pass.
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < lo || v > hi) {
          char range[64];
          std::snprintf(range, sizeof(range), "[%g, %g]", lo, hi);
          return "value " + text + " is not a finite number in " + range;
        }
        return "";
      },
      "FINITE");
}

void AddKvTypeOption(CLI::App& cmd, std::optional<DType>& kv_type) {
  cmd.add_option_function<std::string>(
         "--kv-type",
         [&kv_type](const std::string& name) {
           if (name == "auto") {
             kv_type.reset();
           } else {
             kv_type = name == "f16"    ? DType::kF16
                       : name == "q8_0" ? DType::kQ8_0
                       : name == "q4_0" ? DType::kQ4_0
                                        : DType::kF32;
           }
         },
         "KV cache keys and values (GQA layers): f16 (half the memory and the bytes attention "
         "reads), q8_0 (~0.53x f16), q4_0 (~0.28x f16; q8_0/q4_0 need head dims that are "
         "multiples of 32), f32, or auto: f16 on the cpu backend, f32 on the others; all but "
         "f32 on the cpu backend only")
      ->check(CLI::IsMember({"auto", "f32", "f16", "q8_0", "q4_0"}))
      ->default_str("auto");
}

void AddMlaFormOption(CLI::App& cmd, MlaForm& form) {
  cmd.add_option_function<std::string>(
         "--mla-form", [&form](const std::string& name) { form = ParseMlaForm(name).value(); },
         "MLA models' prefill attention: absorbed (queries into the latent space; a prompt's "
         "logits do not depend on its chunking), expanded (keys and values rebuilt from the "
         "latent per chunk, as transformers computes; fewer multiply-adds for long chunks, "
         "slow for decode; not with DSA), or auto (the cheaper form per chunk: logits then "
         "depend on the chunking)")
      ->check(CLI::IsMember({"absorbed", "expanded", "auto"}))
      ->default_str("absorbed");
}

void AddSpecOptions(CLI::App& cmd, SpeculativeOptions& spec, bool allow_mtp) {
  std::vector<std::string> kinds = {"none", "ngram"};
  if (allow_mtp) kinds.push_back("mtp");
  cmd.add_option_function<std::string>(
         "--spec", [&spec](const std::string& name) { spec.kind = ParseSpecKind(name).value(); },
         allow_mtp ? "speculative decoding: ngram (prompt lookup: drafts copied from earlier "
                     "text), mtp (the model's NextN layer; implies --mtp) or none; the output is "
                     "that of plain decoding (docs/speculative.md)"
                   : "speculative decoding: ngram (prompt lookup: drafts copied from earlier "
                     "text) or none; the output is that of plain decoding (docs/speculative.md)")
      ->check(CLI::IsMember(kinds))
      ->default_str("none");
  cmd.add_option("--draft", spec.max_draft, "most drafted tokens verified per step (with --spec)")
      ->check(CLI::Range(int64_t(1), int64_t(64)))
      ->capture_default_str();
  cmd.add_option("--draft-min-accept", spec.min_acceptance,
                 "pause drafting while the acceptance rate is below this (0: never)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
}

void AddRepackFlag(CLI::App& cmd, bool& repack_weights) {
  cmd.add_flag_callback(
      "--no-repack", [&repack_weights] { repack_weights = false; },
      "use q8_0/q4_0/q4_1 weights in place from the file instead of in the CPU's "
      "panel layout (slower decode; no copy at load)");
}

void AddInt16IndexerFlag(CLI::App& cmd, Int16Indexer& int16_indexer) {
  auto* on = cmd.add_flag_callback(
      "--int16-indexer", [&int16_indexer] { int16_indexer = Int16Indexer::kOn; },
      "DSA models on the CPU: a prefill scores the indexer in int16 and exactly only near each "
      "query's top-k threshold (the same selection). Default: on where the SIMD target is "
      "AVX-512 VNNI (1.3x faster there; slower on AVX2)");
  auto* off = cmd.add_flag_callback(
      "--no-int16-indexer", [&int16_indexer] { int16_indexer = Int16Indexer::kOff; },
      "DSA models on the CPU: always score the indexer exactly in f32");
  on->excludes(off);
}

void AddSamplingOptions(CLI::App& cmd, SamplingFlags& f) {
  cmd.add_option("--temp", f.params.temperature, "temperature (0: greedy)")
      ->check(FiniteNumber(0.0, 1e6));
  cmd.add_option("--top-k", f.params.top_k, "keep the k most likely tokens (0: off)");
  cmd.add_option("--top-p", f.params.top_p, "nucleus sampling mass (1: off)");
  cmd.add_option("--min-p", f.params.min_p, "drop tokens below min-p x the best (0: off)");
  cmd.add_option("--repeat-penalty", f.params.repetition_penalty, "repetition penalty (1: off)");
  cmd.add_option("--repeat-last-n", f.params.repeat_last_n, "tokens the penalty looks back");
  cmd.add_option("--seed", f.seed, "random seed (same seed, same output)");
}

SamplingParams SamplingFlags::Resolve() const {
  SamplingParams p = params;
  p.seed = seed ? *seed : std::random_device{}();
  return p;
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "anymoe: error: %s\n", status.message().c_str());
  if (Communicator* c = JoinedCommunicator(); c != nullptr && c->size() > 1) c->Abort(1);
  return 1;
}

std::unique_ptr<Engine> LoadEngineOrReport(const EngineOptions& options) {
  auto engine = Engine::Load(options);
  if (!engine.ok()) {
    ReportError(engine.status());
    return nullptr;
  }
  if (const MtpBlock* mtp = (*engine)->model().mtp()) {
    std::fprintf(stderr, "anymoe: MTP layer %lld bound (%.1f MiB%s%s)\n",
                 (long long)mtp->layer_index(), double(mtp->weight_bytes()) / (1 << 20),
                 mtp->own_embed() ? ", own embedding" : "", mtp->own_head() ? ", own head" : "");
  }
  return std::move(engine).value();
}

Expected<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open");
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0 || uint64_t(size) > kMaxTextBytes) {
    return Status::Error(path + ": not a readable text of at most 1 GiB");
  }
  in.seekg(0);
  std::string text(size_t(size), '\0');
  in.read(text.data(), size);
  if (!in) return Status::Error(path + ": read failed");
  return text;
}

}  // namespace anymoe::cli
