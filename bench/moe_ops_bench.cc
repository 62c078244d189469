// Micro-benchmarks of the CPU backend's MoE ops: routing (f32 softmax and
// group-limited sigmoid top-k) and the grouped expert matmul over tokens
// sorted by expert, on the GLM-4.5-Air-shaped bench model (64 experts, top 8,
// hidden 1024, expert ffn 512) and GLM-5's router (256 experts, 8 groups).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/route.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe {
namespace {

void BM_RouteToken(benchmark::State& state, RouterSpec spec, int64_t experts) {
  const auto logits = testing::UniformFloats(size_t(experts), 1),
             bias = testing::UniformFloats(size_t(experts), 2);
  std::vector<float> scratch(size_t(3 * experts)), weights(size_t(spec.experts_per_token));
  std::vector<int32_t> ids(size_t(spec.experts_per_token));
  for (auto _ : state) {
    cpu::RouteToken(logits.data(), bias.data(), experts, spec, scratch.data(), ids.data(),
                    weights.data());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()));  // tokens per second
}

// Q8_0 expert weights; `tokens` tokens routed to 8 random experts each, rows
// sorted by expert as MoeBlock hands them over; 1 or 2 threads.
void BM_GroupedMatmul(benchmark::State& state) {
  const int64_t tokens = state.range(0), threads = state.range(1);
  const int64_t experts = 64, top_k = 8, hidden = 1024, ffn = 512;
  const uint64_t row_bytes = BytesFor(DType::kQ8_0, uint64_t(hidden)).value();
  std::vector<uint8_t> w(size_t(experts * ffn) * row_bytes);
  std::mt19937 rng(3);
  for (auto& b : w) b = uint8_t(rng());
  const uint16_t scale = F32ToF16(0.01f);
  for (size_t blk = 0; blk < w.size() / 34; ++blk) std::memcpy(&w[blk * 34], &scale, 2);
  std::vector<Tensor> weights;
  for (int64_t e = 0; e < experts; ++e) {
    weights.push_back(
        Tensor::Of(w.data() + size_t(e * ffn) * row_bytes, DType::kQ8_0, {ffn, hidden}));
  }
  std::vector<int32_t> counts(size_t(experts), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> pick(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e) pick[size_t(e)] = int32_t(e);
    std::shuffle(pick.begin(), pick.end(), rng);
    for (int64_t k = 0; k < top_k; ++k) ++counts[size_t(pick[size_t(k)])];
  }
  std::vector<int32_t> offsets(size_t(experts) + 1, 0);
  for (int64_t e = 0; e < experts; ++e)
    offsets[size_t(e) + 1] = offsets[size_t(e)] + counts[size_t(e)];
  const int64_t rows = tokens * top_k;
  auto x = testing::UniformFloats(size_t(rows * hidden), 4);
  std::vector<float> y(size_t(rows * ffn));
  CpuBackend backend{static_cast<int>(threads)};
  const Tensor xt = Tensor::Of(x.data(), DType::kF32, {rows, hidden});
  const Tensor yt = Tensor::Of(y.data(), DType::kF32, {rows, ffn});
  for (auto _ : state) {
    backend.GroupedMatmul(xt, weights, offsets, yt);
    benchmark::DoNotOptimize(y.data());
  }
  int64_t active = 0;
  for (int32_t c : counts) active += c > 0;
  state.SetBytesProcessed(int64_t(state.iterations()) * active * ffn * int64_t(row_bytes));
  state.counters["experts"] = double(active);
}
BENCHMARK(BM_GroupedMatmul)->ArgsProduct({{1, 16, 128}, {1, 2}})->UseRealTime();

void RegisterRouting() {
  RouterSpec softmax{
      .scoring = RouterSpec::Scoring::kSoftmax, .experts_per_token = 8, .normalize = true};
  RouterSpec glm5{.scoring = RouterSpec::Scoring::kSigmoid,
                  .experts_per_token = 8,
                  .n_group = 8,
                  .topk_group = 4,
                  .normalize = true,
                  .scaling = 2.5f};
  benchmark::RegisterBenchmark("BM_RouteToken/softmax_e64_k8", BM_RouteToken, softmax, 64);
  benchmark::RegisterBenchmark("BM_RouteToken/sigmoid_grouped_e256_k8", BM_RouteToken, glm5, 256);
}

const bool registered = (RegisterRouting(), true);

}  // namespace
}  // namespace anymoe
