// Runs llama-bench's two tests on a loaded engine. pp<n>: n random token ids
// prefilled into an empty cache (in steps of the model's max_step_tokens), so
// t/s = n / time. tg<n>: n random ids fed one Forward call each into an empty
// cache, so t/s = n / time; no sampling, as in llama-bench. tg<n>x<s>: s
// sequences, each its own cache, decoded together (one batched step of s
// tokens per generated position, as a serving step is), t/s = s n / time.
// Each test runs once untimed, then `repetitions` times, each from caches
// holding n_depth random tokens (llama-bench's -d: filled untimed before each
// run; 0, the default, is an empty cache). With an engine that times its ops,
// the timed runs' op times are kept too (the warm-up's and the untimed
// depth fills' are not). tg<n> @ prompt: n tokens generated greedily from
// SetPrompt's prompt (prefilled untimed but for its last token), through the
// generator, with or without speculative drafts: t/s = n / time.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "bench/bench_result.h"
#include "runtime/engine.h"

namespace anymoe {

// Filename, "<arch> <params> <main dtype>", tensor bytes and elements of the
// engine's model.
ModelDescription DescribeModel(Engine& engine);

class BenchRunner {
 public:
  // Token ids come from a generator seeded with `seed`: the same on every run.
  // Tests decode up to `sequences` sequences together (the engine's
  // EngineOptions::sequences, which a device backend reserved caches for).
  explicit BenchRunner(Engine& engine, int64_t sequences = 1, uint64_t seed = 1234);

  // The wall time in ns of each of `repetitions` runs of `test`, after one
  // warm-up run. Errors when the test does not fit the engine's context or a
  // forward step fails.
  Expected<std::vector<uint64_t>> Measure(const BenchTest& test, int repetitions);
  // The same for tests that differ only in index_topk (DSA against dense MLA on
  // one model), run round-robin: each repetition runs every variant once, so
  // load on the machine falls on all alike. Every variant's depth is filled
  // (untimed) with the smallest of their top-k values; each is warmed up once.
  // An index_topk above the model's own is an error (its selection buffers are
  // sized at load: bench the file with the largest top-k and lower it).
  // Returns each variant's samples in order.
  Expected<std::vector<std::vector<uint64_t>>> MeasureInterleaved(
      std::span<const BenchTest> variants, int repetitions);
  // Per timed run of variant `v` of the last Measure: each op's calls and
  // time, when the engine times its ops (EngineOptions::time_ops); else empty.
  const std::vector<OpProfileEntry>& op_profile(size_t v = 0) const {
    static const std::vector<OpProfileEntry> kNone;
    return v < op_profiles_.size() ? op_profiles_[v] : kNone;
  }
  // The expert cache's counters over the timed runs of the last Measure, all
  // its variants (enabled only when the model streams its experts).
  const ExpertCacheStats& expert_cache() const { return expert_cache_; }
  // The prompt of the tests that generate from one (BenchTest::spec).
  void SetPrompt(std::vector<int32_t> prompt) { prompt_ = std::move(prompt); }
  // Drafted and accepted tokens over the timed runs of the last Measure.
  int64_t drafted() const { return drafted_; }
  int64_t accepted() const { return accepted_; }

 private:
  // At least `count` caches, each as long as the engine's context, in one
  // pool as the server's sequences are (made once); an error when a test of
  // `tokens` tokens does not fit that context.
  Status EnsureCaches(int64_t count, int64_t tokens);
  Status CheckTest(const BenchTest& test) const;
  // Model::SetIndexTopK(topk), 0: the model's own (none without DSA).
  Status UseIndexTopK(int64_t topk);
  // Empties the test's caches and fills each with n_depth tokens (untimed).
  Status Reset(const BenchTest& test);
  // `n_tokens` random tokens into `cache`, in steps of the model's max_step_tokens.
  Status Prefill(int64_t n_tokens, KvCache& cache);
  // One timed run of `test` after Reset; EnsureCaches must have made room.
  Status RunOnce(const BenchTest& test);
  int32_t RandomToken();
  // Greedy generation of n_gen tokens from the prompt, continuing the caches
  // (a timed tg @ prompt run reuses all of the prompt but its last token).
  Status Generate(const BenchTest& test, int64_t n_gen);

  Engine& engine_;
  int64_t sequences_;
  std::unique_ptr<KvPool> pool_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  // Per cache: the depth its first rows were filled to (-1: none). A test at
  // that depth or deeper cuts the cache back to it and fills only the rest, as
  // the fill of a 32K depth costs more than the test.
  std::vector<int64_t> filled_depth_;
  std::mt19937_64 rng_;
  std::vector<int32_t> tokens_;
  std::vector<Model::SequenceStep> steps_;
  std::vector<std::vector<OpProfileEntry>> op_profiles_;  // by variant
  ExpertCacheStats expert_cache_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> in_cache_;         // the tokens in caches_[0] (tg @ prompt)
  std::unique_ptr<KvCache> mtp_cache_;    // the MTP layer's (--spec mtp), made once
  int64_t drafted_ = 0, accepted_ = 0;
  int64_t own_topk_ = 0;  // the model's index_topk as loaded (0: no DSA)
};

}  // namespace anymoe
