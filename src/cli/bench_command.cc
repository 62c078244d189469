// `anymoe bench`: llama-bench's pp<n> / tg<n> tests on one or more models and
// thread counts, printed as llama-bench's markdown table or JSON; `--membw`
// adds the machine's read bandwidth and each model's decode roofline. The
// measuring lives in src/bench/; this file is flags and printing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bench/machine.h"
#include "bench/membw.h"
#include "bench/roofline.h"
#include "cli/bench_json_schema.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/matmul_kernels.h"

namespace anymoe::cli {
namespace {

struct BenchFlags {
  std::vector<std::string> models;
  std::vector<int64_t> prompts{128};
  std::vector<int64_t> gens{64};
  std::vector<int64_t> depths{0};
  std::vector<int> threads;  // empty: all cores
  int repetitions = 5;
  std::string backend = "cpu";
  int device = 0;
  std::string output = "md";
  int64_t batch = 512;
  std::vector<int64_t> parallel{1};
  bool membw = false;
  bool op_profile = false;
  int64_t membw_mib = 1024;
  int membw_passes = 5;
  bool repack_weights = true;
  Int16Indexer int16_indexer = Int16Indexer::kAuto;
  std::optional<DType> kv_type;  // empty: the backend's default
  MlaForm mla_form = MlaForm::kAbsorbed;
  ExpertStreamingOptions experts;
  NumaMode numa = NumaMode::kNone;
  std::vector<std::string> specs{"none"};  // with spec_prompt: tg tests generate from it
  int64_t draft = 4;
  std::string spec_prompt;  // text file
  ExpertParallelOptions expert_parallel;
  std::vector<int64_t> index_topks;  // DSA: each test once per value, interleaved
  std::string json_schema;           // file: also report the mask cost of this schema
};

Status Validate(const BenchFlags& f) {
  for (int64_t p : f.prompts) {
    if (p < 0) return Status::Error("-p: prompt sizes must be >= 0, got " + std::to_string(p));
  }
  for (int64_t n : f.gens) {
    if (n < 0) return Status::Error("-n: generation sizes must be >= 0, got " + std::to_string(n));
  }
  for (int64_t d : f.depths) {
    if (d < 0) return Status::Error("-d: depths must be >= 0, got " + std::to_string(d));
  }
  for (int t : f.threads) {
    if (t < 1) return Status::Error("-t: thread counts must be >= 1, got " + std::to_string(t));
  }
  for (int64_t s : f.parallel) {
    if (s < 1 || s > f.batch) {
      return Status::Error("--parallel: sequence counts must be in [1, --batch " +
                           std::to_string(f.batch) + "], got " + std::to_string(s));
    }
  }
  const bool any_pp =
      std::any_of(f.prompts.begin(), f.prompts.end(), [](int64_t p) { return p > 0; });
  const bool any_tg = std::any_of(f.gens.begin(), f.gens.end(), [](int64_t n) { return n > 0; });
  if (!any_pp && !any_tg) return Status::Error("nothing to run: every -p and -n is 0");
  for (const std::string& s : f.specs) {
    RETURN_IF_ERROR(ParseSpecKind(s).status());
  }
  if (f.spec_prompt.empty() && f.specs != std::vector<std::string>{"none"}) {
    return Status::Error("--spec needs --spec-prompt FILE: drafts are guessed from a real text");
  }
  if (!f.spec_prompt.empty() && (f.parallel != std::vector<int64_t>{1} ||
                                 f.depths != std::vector<int64_t>{0})) {
    return Status::Error("--spec-prompt: tg tests from a prompt run one sequence at depth 0");
  }
  for (int64_t k : f.index_topks) {
    if (k < 1) return Status::Error("--index-topk: values must be >= 1, got " + std::to_string(k));
  }
  if (!f.index_topks.empty() && !f.spec_prompt.empty()) {
    return Status::Error("--index-topk: not with --spec-prompt (those tests run the model's own)");
  }
  // An MPI job is joined once per process: one engine per bench.
  if (f.expert_parallel.enabled && (f.models.size() != 1 || f.threads.size() > 1 || f.membw)) {
    return Status::Error("--ep: benchmark one model at one thread count (-t) per job, without --membw");
  }
  return Status::Ok();
}

// Each test with every --index-topk value (one group, measured interleaved),
// or alone.
std::vector<std::vector<BenchTest>> Variants(const BenchFlags& f,
                                             const std::vector<BenchTest>& tests) {
  std::vector<std::vector<BenchTest>> groups;
  for (const BenchTest& t : tests) {
    std::vector<BenchTest>& g = groups.emplace_back();
    if (f.index_topks.empty()) g.push_back(t);
    for (int64_t k : f.index_topks) {
      g.push_back(t);
      g.back().index_topk = k;
    }
  }
  return groups;
}

std::vector<BenchTest> Tests(const BenchFlags& f) {
  std::vector<BenchTest> tests;
  for (int64_t d : f.depths) {
    for (int64_t p : f.prompts) {
      if (p > 0) tests.push_back({p, 0, 1, d});
    }
    for (int64_t n : f.gens) {
      if (n > 0 && !f.spec_prompt.empty()) {
        for (const std::string& spec : f.specs) {
          tests.push_back({0, n, 1, d, spec, spec == "none" ? 0 : f.draft});
        }
        continue;
      }
      for (int64_t s : f.parallel) {
        if (n > 0) tests.push_back({0, n, s, d});
      }
    }
  }
  return tests;
}

int Bench(BenchFlags f) {
  if (Status st = Validate(f); !st.ok()) return ReportError(st);
  if (f.threads.empty()) f.threads = {int(std::max(1u, std::thread::hardware_concurrency()))};
  const bool markdown = f.output == "md";
  const std::vector<BenchTest> tests = Tests(f);
  std::string prompt_text;
  if (!f.spec_prompt.empty()) {
    std::ifstream in(f.spec_prompt, std::ios::binary);
    if (!in) return ReportError(Status::Error(f.spec_prompt + ": cannot open"));
    std::stringstream text;
    text << in.rdbuf();
    prompt_text = text.str();
    if (prompt_text.empty() || prompt_text.size() > (1u << 20)) {
      return ReportError(Status::Error(f.spec_prompt + ": the prompt must hold 1 B to 1 MiB"));
    }
  }
  int64_t max_prompt = 0, max_tokens = 1, max_parallel = 1;
  for (const BenchTest& t : tests) {
    // A prompt has at most a token per byte (and a BOS).
    const int64_t prompt = t.spec.empty() ? 0 : int64_t(prompt_text.size()) + 1;
    max_prompt = std::max({max_prompt, t.n_prompt, t.n_depth, t.n_parallel, prompt});
    max_tokens = std::max(max_tokens, t.n_depth + t.n_prompt + t.n_gen + prompt);
    max_parallel = std::max(max_parallel, t.n_parallel);
  }

  std::vector<MembwResult> bandwidths;
  std::map<int, double> best_gbs;  // by thread count
  if (f.membw) {
    for (int t : f.threads) {
      std::fprintf(stderr, "bench: measuring read bandwidth with %d threads\n", t);
      auto bw = MeasureReadBandwidth({t, uint64_t(f.membw_mib) << 20, f.membw_passes, f.numa});
      if (!bw.ok()) return ReportError(bw.status());
      best_gbs[t] = bw->best_gbs();
      bandwidths.push_back(*bw);
    }
  }

  if (markdown) std::printf("%s", MarkdownHeader().c_str());
  std::fflush(stdout);
  std::vector<BenchResult> results;
  for (const std::string& path : f.models) {
    for (int threads : f.threads) {
      EngineOptions options;
      options.model_path = path;
      options.threads = threads;
      options.backend = f.backend;
      options.device = f.device;
      options.repack_weights = f.repack_weights;
      options.int16_indexer = f.int16_indexer;
      options.numa = f.numa;
      options.kv_type = f.kv_type;
      options.mla_form = f.mla_form;
      options.experts = f.experts;
      options.load_mtp = std::find(f.specs.begin(), f.specs.end(), "mtp") != f.specs.end();
      options.context = max_tokens;
      options.sequences = max_parallel;  // a device backend reserves their caches at load
      options.time_ops = f.op_profile;
      options.max_step_tokens = std::clamp<int64_t>(max_prompt, 1, f.batch);
      options.expert_parallel = f.expert_parallel;
      auto engine = LoadEngineOrReport(options);
      if (!engine) return 1;
      // Expert parallelism: every rank runs every test in step; rank 0 reports.
      Communicator* comm = engine->communicator();
      if (!engine->is_root() && std::freopen("/dev/null", "w", stdout) == nullptr) {
        return ReportError(Status::Error("cannot silence stdout on rank > 0"));
      }
      if (max_tokens > engine->context()) {
        return ReportError(Status::Error("tests need " + std::to_string(max_tokens) +
                                         " tokens of context but " + path + " allows " +
                                         std::to_string(engine->context())));
      }
      if (engine->is_root() && engine->backend().kind() == BackendKind::kCpu) {
        std::fprintf(stderr, "bench: %s: %s", path.c_str(),
                     CpuMatmulKernelLine(engine->file().tensors()).c_str());
      }
      if (!f.json_schema.empty() && engine->is_root()) {
        // Printed before the table rows of this model: the mask cost per step
        // next to the tg tests' time per token.
        const int64_t steps = f.gens.empty() ? 64 : std::max<int64_t>(f.gens[0], 1);
        const Status st = ReportJsonSchemaMaskCost(*engine, f.json_schema, steps, 2);
        if (!st.ok()) return ReportError(st);
        if (markdown) std::printf("\n%s", MarkdownHeader().c_str());
      }
      const ModelDescription model = DescribeModel(*engine);
      std::optional<DecodeBytes> decode_bytes;
      if (f.membw) {
        auto bytes = DecodeBytesPerToken(engine->file().tensors(), engine->model().config());
        if (!bytes.ok()) return ReportError(bytes.status());
        decode_bytes = *bytes;
      }
      BenchRunner runner(*engine, max_parallel);
      if (!prompt_text.empty()) runner.SetPrompt(engine->Encode(prompt_text));
      for (const std::vector<BenchTest>& group : Variants(f, tests)) {
        if (engine->is_root()) {
          for (const BenchTest& test : group) {
            std::fprintf(stderr, "bench: %s, %d threads: %s\n", path.c_str(), threads,
                         test.Name().c_str());
          }
        }
        const uint64_t sent0 = comm ? comm->bytes_sent() : 0;
        const double wait0 = comm ? comm->wait_seconds() : 0;
        const auto start = std::chrono::steady_clock::now();
        const std::string test_time = UtcTimestamp();
        auto samples = runner.MeasureInterleaved(group, f.repetitions);
        if (!samples.ok()) return ReportError(samples.status().WithContext(path));
        for (size_t v = 0; v < group.size(); ++v) {
          const BenchTest& test = group[v];
          BenchResult r;
          r.model = model;
          r.backend = f.backend;
          if (engine->backend().kind() != BackendKind::kCpu) {  // llama-bench's GPU fields
            r.device = engine->backend().device().name;
            r.device_layers = engine->model().config().num_layers;
            r.cpu_moe_layers = std::min(f.experts.cpu_moe_layers, r.device_layers);
          }
          r.kv_type = std::string(Name(engine->kv_type()));
          r.threads = threads;
          r.batch = engine->model().max_step_tokens();
          r.test = test;
          r.test_time = test_time;
          r.samples_ns = std::move((*samples)[v]);
          if (comm) {  // per rank: time spent waiting in the exchanges, bytes this rank sent
            const double wall =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr,
                         "bench: ep rank %d of %d: %s: %.3f s of %.3f s waiting in exchanges "
                         "(%.1f %%), %.2f MiB sent\n",
                         comm->rank(), comm->size(), test.Name().c_str(),
                         comm->wait_seconds() - wait0, wall,
                         100 * (comm->wait_seconds() - wait0) / std::max(wall, 1e-9),
                         double(comm->bytes_sent() - sent0) / (1 << 20));
          }
          r.op_profile = runner.op_profile(v);
          r.expert_cache = runner.expert_cache();
          r.drafted = runner.drafted();
          r.accepted = runner.accepted();
          if (!test.spec.empty() && r.drafted > 0) {
            std::fprintf(stderr, "bench: %s: %lld of %lld drafts accepted (%.1f %%)\n",
                         test.Name().c_str(), static_cast<long long>(r.accepted),
                         static_cast<long long>(r.drafted),
                         100.0 * double(r.accepted) / double(r.drafted));
          }
          // The roofline counts weights only: at depth the KV cache is read too.
          if (decode_bytes && test.n_prompt == 0 && test.n_parallel == 1 && test.n_depth == 0)
            r.roofline = {best_gbs[threads], *decode_bytes};
          if (markdown) {
            std::printf("%s", MarkdownRow(r).c_str());
            std::fflush(stdout);
          }
          results.push_back(std::move(r));
        }
      }
    }
  }
  if (markdown && f.membw) std::printf("\n%s", MarkdownRoofline(bandwidths, results).c_str());
  if (markdown) {
    const std::string cache = MarkdownExpertCache(results);
    if (!cache.empty()) std::printf("\n%s", cache.c_str());
  }
  if (markdown && f.op_profile) {
    for (const BenchResult& r : results) std::printf("\n%s", MarkdownOpProfile(r).c_str());
  }
  if (!markdown) std::printf("%s", JsonReport(results, CpuModelName()).c_str());
  return 0;
}

}  // namespace

CommandFn RegisterBench(CLI::App& cmd) {
  auto f = std::make_shared<BenchFlags>();
  AddExpertParallelOptions(cmd, f->expert_parallel);
  cmd.add_option("-m,--model", f->models, "GGUF file or HF model folder (repeatable)")->required();
  cmd.add_option("-p,--n-prompt", f->prompts, "prompt sizes for pp tests, e.g. 128,512 (0: none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("-n,--n-gen", f->gens, "token counts for tg tests, e.g. 64 (0: none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("-d,--n-depth", f->depths,
                 "tokens already in the cache when each test starts, e.g. 0,512 (llama-bench -d)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("-t,--threads", f->threads, "CPU thread counts, e.g. 1,2 (default: all cores)")
      ->delimiter(',');
  cmd.add_option("--backend", f->backend, "compute backend")
      ->check(CLI::IsMember(AvailableBackends()));
  cmd.add_option("--device", f->device, "device index of a device backend");
  AddCpuTargetOption(cmd);
  AddNumaOption(cmd, f->numa);
  cmd.add_option("-r,--repetitions", f->repetitions, "timed runs of each test")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd.add_option("-o,--output", f->output, "md (llama-bench's table) or json")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  cmd.add_option("--batch", f->batch, "most prompt tokens per forward step")
      ->check(CLI::Range(int64_t(1), int64_t(4096)))
      ->capture_default_str();
  cmd.add_option("--parallel", f->parallel,
                 "sequences decoded together in tg tests, e.g. 1,8 (each its own cache, all in one "
                 "pool as in serve)")
      ->delimiter(',')
      ->capture_default_str();
  AddRepackFlag(cmd, f->repack_weights);
  AddInt16IndexerFlag(cmd, f->int16_indexer);
  AddKvTypeOption(cmd, f->kv_type);
  AddMlaFormOption(cmd, f->mla_form);
  AddExpertOptions(cmd, f->experts);
  cmd.add_option("--spec-prompt", f->spec_prompt,
                 "tg tests generate greedily from this text file's prompt (prefilled untimed) "
                 "instead of feeding random tokens; needed by --spec");
  cmd.add_option("--spec", f->specs,
                 "with --spec-prompt: speculative drafters to run each tg test with, e.g. "
                 "none,ngram,mtp (mtp loads the model's NextN layer; docs/speculative.md)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--draft", f->draft, "most drafted tokens per step (with --spec)")
      ->check(CLI::Range(int64_t(1), int64_t(64)))
      ->capture_default_str();
  cmd.add_option("--index-topk", f->index_topks,
                 "DSA models: run each test with each of these index_topk values (keys kept per "
                 "query; >= the context: dense MLA on the same weights), interleaved per "
                 "repetition; at most the file's own (e.g. glm5-mini-dense: 2048,65536)")
      ->delimiter(',');
  cmd.add_flag("--membw", f->membw,
               "measure read memory bandwidth and print each model's decode roofline");
  cmd.add_flag("--op-profile", f->op_profile,
               "time every backend op of the timed runs and print, per test, each op's calls, "
               "time, device launches and host<->device copies per run (device backends wait "
               "for each op: the runs are slower)");
  cmd.add_option("--json-schema", f->json_schema,
                 "also report the structured-output mask cost per decode step of this JSON schema "
                 "(walk 1 computes masks, walk 2 finds them cached) and the automaton's size");
  cmd.add_option("--membw-mib", f->membw_mib, "bandwidth buffer size in MiB")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  cmd.add_option("--membw-passes", f->membw_passes, "timed bandwidth passes")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  return [f] { return Bench(*f); };
}

}  // namespace anymoe::cli
