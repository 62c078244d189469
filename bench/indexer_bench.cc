// Micro-benchmarks of the DSA lightning indexer's scores at GLM-5's indexer
// shape (32 heads x 128): one query at a time (decode) against a block of
// queries over transposed key tiles (prefill), one thread.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/kernels/indexer_scores.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

constexpr int64_t kHeads = 32, kDim = 128;

struct Inputs {
  explicit Inputs(int64_t n_keys, int64_t nq)
      : q(testing::UniformFloats(size_t(nq * kHeads * kDim), 1)),
        w(testing::UniformFloats(size_t(nq * kHeads), 2)),
        keys(testing::UniformFloats(size_t(n_keys * kDim), 3)),
        rows(size_t(n_keys)) {
    for (int64_t u = 0; u < n_keys; ++u) rows[size_t(u)] = int32_t(u);
  }
  std::vector<float> q, w, keys;
  std::vector<int32_t> rows;
};

// Items: query-key scores (each kHeads * kDim multiply-adds).
void BM_IndexerScoresOneQuery(benchmark::State& state) {
  const int64_t n_keys = state.range(0), nq = state.range(1);
  const Inputs in(n_keys, nq);
  std::vector<float> q_t(size_t(nq * IndexerHeadSlots(kHeads) * kDim)),
      scores(static_cast<size_t>(n_keys));
  for (int64_t j = 0; j < nq; ++j) {
    IndexerQueryLayout(in.q.data() + j * kHeads * kDim, kHeads, kDim,
                       q_t.data() + j * IndexerHeadSlots(kHeads) * kDim);
  }
  for (auto _ : state) {
    for (int64_t j = 0; j < nq; ++j) {
      IndexerScores(q_t.data() + j * IndexerHeadSlots(kHeads) * kDim, in.w.data() + j * kHeads,
                    kHeads, kDim, in.keys.data(), in.rows.data(), 0, n_keys,
                    1.0f / 11.3f, scores.data());
    }
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * nq * n_keys);
}
BENCHMARK(BM_IndexerScoresOneQuery)->ArgsProduct({{1024, 32768}, {1, 4}});

void BM_IndexerScoresQueries(benchmark::State& state) {
  const int64_t n_keys = state.range(0), nq = state.range(1);
  const Inputs in(n_keys, nq);
  std::vector<float> tile(size_t(IndexerTileFloats(kDim))),
      scores(static_cast<size_t>(nq * n_keys));
  for (auto _ : state) {
    IndexerScoresQueries(in.q.data(), kHeads * kDim, in.w.data(), kHeads, nq, kHeads, kDim,
                         in.keys.data(), in.rows.data(), 0, n_keys, 1.0f / 11.3f, scores.data(),
                         n_keys, tile.data());
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * nq * n_keys);
}
BENCHMARK(BM_IndexerScoresQueries)->ArgsProduct({{1024, 32768}, {1, 4, 8, 16}});

}  // namespace
}  // namespace anymoe::kernels
