#include "bench/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "backends/fallback_backend.h"
#include "formats/gguf.h"
#include "models/model_stats.h"
#include "runtime/generator.h"

namespace anymoe {
namespace {

// "135M", "1.2B": the way llama.cpp labels sizes.
std::string SizeLabel(int64_t n) {
  char buf[32];
  if (n < 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.0fM", double(n) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fB", double(n) / 1e9);
  }
  return buf;
}

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

// The dtype holding the most elements of the matrices (vectors are f32 anyway).
std::string MainDType(const TensorSource& tensors) {
  std::map<std::string_view, int64_t> elements;
  for (const TensorInfo& t : tensors.tensors()) {
    if (t.shape.size() >= 2) elements[Name(t.dtype)] += t.elements();
  }
  std::string_view best = "f32";
  int64_t most = -1;
  for (const auto& [name, n] : elements) {
    if (n > most) best = name, most = n;
  }
  return Upper(best);
}

}  // namespace

ModelDescription DescribeModel(Engine& engine) {
  const ModelFile& file = engine.file();
  const ModelConfig& config = engine.model().config();
  ModelDescription d;
  d.filename = file.path;
  for (const TensorInfo& t : file.tensors().tensors()) d.size_bytes += t.bytes;
  d.n_params = CountTensorElements(file.tensors());

  std::string arch = config.arch;
  if (file.gguf != nullptr) {
    auto name = file.gguf->FindString("general.architecture");
    if (name.ok() && name->has_value()) arch = **name;
  }
  const ParameterCounts p = CountParameters(config);
  std::string size = SizeLabel(d.n_params);
  if (config.is_moe()) size += ".A" + SizeLabel(p.active);
  d.type = arch + " " + size + " " + MainDType(file.tensors());
  return d;
}

BenchRunner::BenchRunner(Engine& engine, int64_t sequences, uint64_t seed)
    : engine_(engine),
      sequences_(std::max<int64_t>(1, sequences)),
      rng_(seed),
      own_topk_(engine.model().config().dsa.topk) {}

int32_t BenchRunner::RandomToken() {
  const uint64_t vocab = uint64_t(engine_.model().config().vocab_size);
  return int32_t(rng_() % vocab);
}

Status BenchRunner::EnsureCaches(int64_t count, int64_t tokens) {
  if (tokens > engine_.context()) {
    return Status::Error("test needs " + std::to_string(tokens) + " tokens of context but " +
                         engine_.file().path + " allows " + std::to_string(engine_.context()));
  }
  if (count > engine_.model().max_step_tokens()) {
    return Status::Error("test decodes " + std::to_string(count) +
                         " sequences together but a step takes at most " +
                         std::to_string(engine_.model().max_step_tokens()) + " tokens (--batch)");
  }
  if (count > sequences_) {
    return Status::Error("test decodes " + std::to_string(count) +
                         " sequences together but the bench was set up for " +
                         std::to_string(sequences_));
  }
  // One pool for every sequence, made once, as the server's scheduler makes
  // it (so a device decodes the sequences of a step in batched launches): a
  // device backend reserved sequences x context (in whole blocks) at load, and
  // a larger pool made for a later test would not fit there.
  if (pool_ == nullptr) {
    const int64_t b = KvPool::kDefaultBlockTokens;
    const int64_t per_sequence = (engine_.context() + b - 1) / b * b;
    ASSIGN_OR_RETURN(pool_, engine_.model().NewPool(sequences_ * per_sequence, per_sequence));
  }
  while (int64_t(caches_.size()) < count) {
    caches_.push_back(std::make_unique<KvCache>(pool_.get(), engine_.context()));
  }
  return Status::Ok();
}

Status BenchRunner::Prefill(int64_t n_tokens, KvCache& cache) {
  Model& model = engine_.model();
  const int64_t step = std::max<int64_t>(1, model.max_step_tokens());
  for (int64_t done = 0; done < n_tokens;) {
    const int64_t n = std::min(step, n_tokens - done);
    tokens_.resize(size_t(n));
    for (int32_t& t : tokens_) t = RandomToken();
    ASSIGN_OR_RETURN(Tensor logits, model.Forward(tokens_, cache, /*all_logits=*/false));
    (void)logits;
    done += n;
  }
  model.backend().Synchronize();
  return Status::Ok();
}

Status BenchRunner::Reset(const BenchTest& test) {
  if (!test.spec.empty()) {
    // The whole prompt and one generated token, through the generator (which
    // also fills the MTP layer's cache for --spec mtp); the timed run then
    // reuses all of the prompt but its last token.
    caches_[0]->Clear();
    if (!filled_depth_.empty()) filled_depth_[0] = -1;
    if (mtp_cache_) mtp_cache_->Clear();
    in_cache_.clear();
    return Generate(test, 1);
  }
  filled_depth_.resize(caches_.size(), -1);
  for (int64_t s = 0; s < test.n_parallel; ++s) {
    KvCache& cache = *caches_[size_t(s)];
    int64_t& filled = filled_depth_[size_t(s)];
    // Rows past the fill are rewritten by the run; a deeper test adds to it.
    if (filled >= 0 && filled <= test.n_depth && cache.length() >= filled) {
      cache.set_length(filled);
    } else {
      cache.Clear();
    }
    filled = -1;
    RETURN_IF_ERROR(Prefill(test.n_depth - cache.length(), cache));
    filled = test.n_depth;
  }
  return Status::Ok();
}

Status BenchRunner::Generate(const BenchTest& test, int64_t n_gen) {
  Generator generator(engine_.model(), nullptr);
  Sequence seq;  // borrows the caches as Reset or the last run left them
  seq.cache = std::move(caches_[0]);
  seq.mtp_cache = std::move(mtp_cache_);
  seq.tokens = std::move(in_cache_);
  GenerateOptions options;
  options.max_new_tokens = n_gen;
  options.sampling = SamplingParams::Greedy();
  ASSIGN_OR_RETURN(options.spec.kind, ParseSpecKind(test.spec));
  options.spec.max_draft = test.n_draft;
  auto result = generator.Generate(seq, prompt_, options, nullptr);
  engine_.model().backend().Synchronize();
  caches_[0] = std::move(seq.cache);
  mtp_cache_ = std::move(seq.mtp_cache);
  in_cache_ = std::move(seq.tokens);
  if (!result.ok()) return result.status();
  if (result->stats.generated_tokens != n_gen) {
    return Status::Error("bench test " + test.Name() + " stopped after " +
                         std::to_string(result->stats.generated_tokens) + " tokens");
  }
  drafted_ += result->stats.drafted_tokens;
  accepted_ += result->stats.accepted_tokens;
  return Status::Ok();
}

Status BenchRunner::RunOnce(const BenchTest& test) {
  if (!test.spec.empty()) return Generate(test, test.n_gen);
  Model& model = engine_.model();
  RETURN_IF_ERROR(Prefill(test.n_prompt, *caches_[0]));
  tokens_.resize(size_t(test.n_parallel));
  steps_.resize(size_t(test.n_parallel));
  for (int64_t i = 0; i < test.n_gen; ++i) {
    for (int64_t s = 0; s < test.n_parallel; ++s) {
      tokens_[size_t(s)] = RandomToken();
      steps_[size_t(s)] = {std::span(&tokens_[size_t(s)], 1), caches_[size_t(s)].get(), false};
    }
    ASSIGN_OR_RETURN(Tensor logits, model.ForwardBatch(steps_));
    (void)logits;
    model.backend().Synchronize();
  }
  return Status::Ok();
}

Expected<std::vector<uint64_t>> BenchRunner::Measure(const BenchTest& test, int repetitions) {
  ASSIGN_OR_RETURN(auto samples, MeasureInterleaved(std::span(&test, 1), repetitions));
  return std::move(samples[0]);
}

Status BenchRunner::CheckTest(const BenchTest& test) const {
  if (test.n_prompt < 0 || test.n_gen < 0 || test.n_prompt + test.n_gen == 0) {
    return Status::Error("bench test " + test.Name() + " has no tokens");
  }
  if (test.n_depth < 0) {
    return Status::Error("bench test " + test.Name() + ": depth must be >= 0, got " +
                         std::to_string(test.n_depth));
  }
  if (test.n_parallel < 1 || (test.n_parallel > 1 && test.n_prompt > 0)) {
    return Status::Error("bench test " + test.Name() +
                         ": only tg tests decode several sequences together");
  }
  if (!test.spec.empty() && (test.n_prompt > 0 || test.n_parallel > 1 || test.n_depth > 0 ||
                             prompt_.empty() || test.index_topk > 0)) {
    return Status::Error("bench test " + test.Name() +
                         ": generates from a prompt (--spec-prompt), one sequence, no depth, the "
                         "model's own index_topk");
  }
  if (test.index_topk < 0) {
    return Status::Error("bench test " + test.Name() + ": index_topk must be >= 0");
  }
  return Status::Ok();
}

Status BenchRunner::UseIndexTopK(int64_t topk) {
  Model& model = engine_.model();
  if (topk == 0) topk = own_topk_;
  if (topk == 0 || topk == model.config().dsa.topk) return Status::Ok();
  return model.SetIndexTopK(topk);
}

Expected<std::vector<std::vector<uint64_t>>> BenchRunner::MeasureInterleaved(
    std::span<const BenchTest> variants, int repetitions) {
  if (variants.empty()) return Status::Error("bench: no test to measure");
  if (repetitions < 1) {
    return Status::Error("bench repetitions must be at least 1, got " +
                         std::to_string(repetitions));
  }
  // The depth fills run with the smallest top-k of the variants (the cheapest:
  // the timed runs' cost does not depend on what the random tokens' rows hold).
  int64_t fill_topk = 0;
  for (const BenchTest& test : variants) {
    RETURN_IF_ERROR(CheckTest(test));
    const BenchTest& first = variants[0];
    if (test.n_prompt != first.n_prompt || test.n_gen != first.n_gen ||
        test.n_parallel != first.n_parallel || test.n_depth != first.n_depth ||
        test.spec != first.spec || test.n_draft != first.n_draft) {
      return Status::Error("bench: interleaved tests " + first.Name() + " and " + test.Name() +
                           " differ in more than index_topk");
    }
    if (test.index_topk > 0 && own_topk_ == 0) {
      return Status::Error("bench test " + test.Name() + ": the model has no DSA indexer");
    }
    const int64_t k = test.index_topk > 0 ? test.index_topk : own_topk_;
    if (k > own_topk_) {
      return Status::Error("bench test " + test.Name() + ": index_topk above the model's own " +
                           std::to_string(own_topk_) +
                           " (its key selections are sized at load: bench the file with the "
                           "largest top-k and lower it)");
    }
    fill_topk = fill_topk == 0 ? k : std::min(fill_topk, k);
  }
  // The model's own top-k comes back however the runs end.
  struct RestoreTopK {
    BenchRunner* runner;
    ~RestoreTopK() { (void)runner->UseIndexTopK(0); }
  } restore{this};
  const BenchTest& test0 = variants[0];
  // Outside the timed runs.
  const int64_t prompt = test0.spec.empty() ? 0 : int64_t(prompt_.size());
  RETURN_IF_ERROR(EnsureCaches(test0.n_parallel,
                               test0.n_depth + test0.n_prompt + test0.n_gen + prompt));
  // Warm-up as llama-bench does it: the whole prompt, or one generated token.
  for (const BenchTest& test : variants) {
    BenchTest warm_up = test.n_prompt > 0 ? BenchTest{test.n_prompt, 0, 1, test.n_depth}
                                          : BenchTest{0, 1, test.n_parallel, test.n_depth};
    warm_up.index_topk = test.index_topk;
    if (!test.spec.empty()) {
      warm_up = test;
      warm_up.n_gen = 1;
    }
    RETURN_IF_ERROR(UseIndexTopK(fill_topk));
    RETURN_IF_ERROR(Reset(warm_up));
    RETURN_IF_ERROR(UseIndexTopK(warm_up.index_topk));
    RETURN_IF_ERROR(RunOnce(warm_up));
  }
  std::vector<std::vector<uint64_t>> samples(variants.size());
  auto* timer = dynamic_cast<FallbackBackend*>(&engine_.backend());  // null on a bare CPU backend
  struct Totals {
    uint64_t calls = 0, launches = 0, transfers = 0;
    double seconds = 0;
  };
  // By variant, then op label.
  std::vector<std::map<std::pair<std::string, DType>, Totals>> ops(variants.size());
  expert_cache_ = ExpertCacheStats();
  drafted_ = accepted_ = 0;
  bool first_run = true;
  // Round-robin: every variant once per repetition, so a change in the
  // machine's load falls on all of them alike.
  for (int r = 0; r < repetitions; ++r) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const BenchTest& test = variants[v];
      RETURN_IF_ERROR(UseIndexTopK(fill_topk));
      RETURN_IF_ERROR(Reset(test));  // untimed, as llama-bench fills its depth
      RETURN_IF_ERROR(UseIndexTopK(test.index_topk));
      if (timer != nullptr) timer->ResetTimes();
      const ExpertCacheStats before = engine_.model().routing_stats().cache;
      const auto start = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(RunOnce(test));
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start);
      const ExpertCacheStats after = engine_.model().routing_stats().cache;
      if (after.enabled) {  // summed over the timed runs
        const ExpertCacheStats run_stats = ExpertCacheStats::Delta(after, before);
        if (first_run) {
          expert_cache_ = run_stats;
        } else {
          expert_cache_.Add(run_stats);
        }
      }
      first_run = false;
      samples[v].push_back(uint64_t(ns.count()));
      if (timer == nullptr) continue;
      for (const FallbackBackend::OpTime& t : timer->times()) {
        Totals& total = ops[v][{FallbackBackend::Label(t.op, t.fusion), t.dtype}];
        total.calls += t.calls;
        total.seconds += t.seconds;
        total.launches += t.launches;
        total.transfers += t.transfers;
      }
    }
  }
  op_profiles_.assign(variants.size(), {});
  const double n = repetitions;
  for (size_t v = 0; v < variants.size(); ++v) {
    std::vector<OpProfileEntry>& profile = op_profiles_[v];
    for (const auto& [key, total] : ops[v]) {
      profile.push_back({key.first, std::string(Name(key.second)), double(total.calls) / n,
                         1e3 * total.seconds / n, double(total.launches) / n,
                         double(total.transfers) / n});
    }
    std::sort(profile.begin(), profile.end(),
              [](const OpProfileEntry& a, const OpProfileEntry& b) { return a.ms > b.ms; });
  }
  return samples;
}

}  // namespace anymoe
