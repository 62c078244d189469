// One benchmark result as llama-bench reports it: which model, threads and
// test (pp<n>: a prompt of n tokens in one prefill; tg<n>: n tokens generated
// one at a time), the wall time of each repetition, and the mean and sample
// standard deviation of their tokens/s.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/roofline.h"
#include "models/experts/expert_cache_stats.h"

namespace anymoe {

struct BenchTest {
  int64_t n_prompt = 0;      // pp test when > 0
  int64_t n_gen = 0;         // tg test when > 0
  int64_t n_parallel = 1;    // tg: sequences decoded together, one token each per step
  int64_t n_depth = 0;       // tokens already in each cache when the test starts (-d)
  // A tg test that generates from the runner's prompt (BenchRunner::SetPrompt,
  // prefilled untimed), greedy, through the generator: "none", or a
  // speculative drafter ("ngram") with up to n_draft drafts per step. Empty:
  // random tokens fed one step each, as llama-bench does.
  std::string spec = "";
  int64_t n_draft = 0;
  // DSA models: the keys each query keeps in the timed runs (Model::SetIndexTopK;
  // >= the context: dense MLA on the same weights); 0: the model's own.
  int64_t index_topk = 0;
  // "pp128", "tg64", "pp128+tg64", "tg64x8" (8 sequences); " @ d512" with a
  // depth; "tg64 @ prompt", "tg64 @ prompt ngram/4" from the prompt; " topk65536"
  // with an index_topk.
  std::string Name() const;
};

struct ModelDescription {
  std::string filename;     // as given on the command line
  std::string type;         // "<arch> <params> <main dtype>", e.g. "llama 135M Q4_1"
  uint64_t size_bytes = 0;  // bytes of all tensors
  int64_t n_params = 0;     // elements of all tensors
};

// The decode roofline of a tg result (with `anymoe bench --membw`).
struct RooflineFigures {
  double bandwidth_gbs = 0;
  DecodeBytes bytes;
  Roofline roofline() const { return {bandwidth_gbs, bytes.per_token()}; }
};

// One op x weight dtype of a result's timed runs (`anymoe bench --op-profile`),
// per run: how often it was called, its wall time to completion, and (device
// backends) the device commands it launched and host<->device copies it made.
struct OpProfileEntry {
  // "Matmul", "Attention", ... (the Backend method), with the parts a fused
  // call took in: "RmsNorm+Matmul+SwiGlu", "Rope+ScatterRows+Attention".
  std::string op;
  std::string dtype;  // the weight's for matmuls and embeddings, else "f32"
  double calls = 0;
  double ms = 0;
  double launches = 0;
  double transfers = 0;
};

struct BenchResult {
  ModelDescription model;
  std::string backend = "cpu";
  std::string device;           // a device backend's device name ("" on the cpu backend)
  int64_t device_layers = 0;    // layers that run on that device (all of them; 0 on the cpu)
  int64_t cpu_moe_layers = 0;   // of those, layers whose routed experts run on the CPU (--n-cpu-moe)
  std::string kv_type = "f16";  // the KV cache's keys and values (Engine::kv_type)
  int threads = 0;
  int64_t batch = 0;  // tokens per prefill step
  BenchTest test;
  std::string test_time;             // RFC 3339 UTC, when the test started
  std::vector<uint64_t> samples_ns;  // wall time of each repetition
  std::optional<RooflineFigures> roofline;
  std::vector<OpProfileEntry> op_profile;  // with --op-profile; by time, largest first
  ExpertCacheStats expert_cache;           // streamed experts: the timed runs' counters
  int64_t drafted = 0, accepted = 0;       // speculative drafts of the timed runs

  int64_t tokens() const { return test.n_prompt + test.n_gen * test.n_parallel; }
  std::vector<double> samples_ts() const;  // tokens / seconds per repetition
};

// Mean, and sample standard deviation (n - 1; 0 for fewer than two values),
// as llama-bench computes them.
double Mean(std::span<const double> v);
double SampleStddev(std::span<const double> v);

}  // namespace anymoe
