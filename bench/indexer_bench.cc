// Micro-benchmarks of the DSA lightning indexer's scores at GLM-5's indexer
// shape (32 heads x 128): one query at a time (decode) against a block of
// queries over transposed key tiles (prefill), the int16 block kernel, and a
// whole prefill top-k (64 queries, top 2048) scored exactly then selected (the
// path before the int16 one) against CpuBackend::IndexerTopK; one thread.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/indexer.h"
#include "backends/cpu/kernels/indexer_int16.h"
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

void BM_IndexerInt16Scores(benchmark::State& state) {
  const int64_t n_keys = state.range(0), nq = state.range(1);
  const Inputs in(n_keys, nq);
  const int64_t n_pairs = IndexerInt16Pairs(kDim);
  std::vector<int16_t> tiles(size_t(IndexerInt16KeyElements(n_keys, kDim)));
  std::vector<float> key_scale(size_t(n_keys + IndexerInt16TileKeys())), abs_sum(key_scale.size());
  const IndexerKeyQuant kq{tiles.data(), key_scale.data(), abs_sum.data()};
  QuantizeIndexerKeys(in.keys.data(), in.rows.data(), kDim, 0, n_keys, true, kq);
  std::vector<int32_t> pairs(size_t(nq * kHeads * n_pairs));
  std::vector<float> head_scale(size_t(nq * kHeads)), scores(size_t(nq * key_scale.size()));
  for (int64_t j = 0; j < nq; ++j) {
    IndexerQueryQuant qq{pairs.data() + j * kHeads * n_pairs, head_scale.data() + j * kHeads};
    QuantizeIndexerQuery(in.q.data() + j * kHeads * kDim, in.w.data() + j * kHeads, kHeads, kDim,
                         1.0f / 11.3f, qq);
  }
  for (auto _ : state) {
    IndexerInt16Scores(pairs.data(), kHeads * n_pairs, head_scale.data(), kHeads, in.w.data(),
                       kHeads, nq, kHeads, kDim, kq, 0, n_keys, scores.data(),
                       int64_t(key_scale.size()));
    benchmark::DoNotOptimize(scores.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * nq * n_keys);
}
BENCHMARK(BM_IndexerInt16Scores)->ArgsProduct({{1024, 4096, 32768}, {8}});

constexpr int64_t kPrefillQueries = 64, kTopK = 2048, kBlock = 8;

// The prefill top-k as it was before the int16 path: every key scored exactly
// per block of queries, then SelectTopK per query.
void BM_IndexerTopKPrefillExact(benchmark::State& state) {
  const int64_t n_keys = state.range(0), n_past = n_keys - kPrefillQueries;
  const Inputs in(n_keys, kPrefillQueries);
  std::vector<float> tile(size_t(IndexerTileFloats(kDim))),
      scores(static_cast<size_t>(kBlock * n_keys));
  std::vector<int32_t> order(static_cast<size_t>(n_keys)), out(static_cast<size_t>(kTopK));
  for (auto _ : state) {
    for (int64_t t0 = 0; t0 < kPrefillQueries; t0 += kBlock) {
      IndexerScoresQueries(in.q.data() + t0 * kHeads * kDim, kHeads * kDim,
                           in.w.data() + t0 * kHeads, kHeads, kBlock, kHeads, kDim, in.keys.data(),
                           in.rows.data(), 0, n_past + t0 + kBlock, 1.0f / 11.3f, scores.data(),
                           n_keys, tile.data());
      for (int64_t i = 0; i < kBlock; ++i) {
        cpu::SelectTopK(scores.data() + i * n_keys, n_past + t0 + i + 1, kTopK, order.data(),
                        out.data());
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPrefillQueries * n_keys);
}
BENCHMARK(BM_IndexerTopKPrefillExact)
    ->Arg(4096)
    ->Arg(16384)
    ->Arg(32768)
    ->Unit(benchmark::kMillisecond);

// The same selection through CpuBackend::IndexerTopK with the int16 path
// forced on (int16 scores, bounds, exact scores for the band).
void BM_IndexerTopKPrefill(benchmark::State& state) {
  const int64_t n_keys = state.range(0), n_past = n_keys - kPrefillQueries;
  const Inputs in(n_keys, kPrefillQueries);
  CpuBackend backend(1);
  backend.set_int16_indexer(Int16Indexer::kOn);
  std::vector<int32_t> selection(size_t(kPrefillQueries * kTopK)),
      counts(static_cast<size_t>(kPrefillQueries));
  for (auto _ : state) {
    backend.IndexerTopK(
        Tensor::Of(const_cast<float*>(in.q.data()), DType::kF32, {kPrefillQueries, kHeads, kDim}),
        Tensor::Of(const_cast<float*>(in.keys.data()), DType::kF32, {n_keys, kDim}),
        Tensor::Of(const_cast<float*>(in.w.data()), DType::kF32, {kPrefillQueries, kHeads}),
        in.rows, n_past, 1.0f / 11.3f, kTopK, selection, counts);
    benchmark::DoNotOptimize(selection.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPrefillQueries * n_keys);
}
BENCHMARK(BM_IndexerTopKPrefill)->Arg(4096)->Arg(16384)->Arg(32768)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace anymoe::kernels
