// Micro-benchmarks of the per-row SIMD kernels next to the matmuls: attention
// over a cached sequence (online softmax), SiLU-gated product, f32 dot / axpy,
// and activation quantisation, one thread, on SmolLM2 and GLM shapes.
#include <benchmark/benchmark.h>

#include <algorithm>

#include <random>
#include <type_traits>
#include <vector>

#include "backends/cpu/huge_page_arena.h"
#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/dot.h"
#include "backends/cpu/kernels/norm.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "core/half.h"
#include "hwy/aligned_allocator.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

// One query of head dim d over n cached keys (K and V rows of one kv head in a
// pool with 3 kv heads, as SmolLM2's GQA cache lays them out).
void BM_AttendOnlineSoftmax(benchmark::State& state) {
  const int64_t n = state.range(0), d = state.range(1), stride = 3 * d;
  const auto k = testing::UniformFloats(size_t(n * stride), 1),
             v = testing::UniformFloats(size_t(n * stride), 2);
  const auto q = testing::UniformFloats(size_t(d), 3);
  std::vector<float> out(static_cast<size_t>(d));
  for (auto _ : state) {
    AttendOnlineSoftmax(q.data(), k.data(), v.data(), n, nullptr, stride, stride, d, d, 0.125f,
                        out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);  // keys per second
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 2 * d * int64_t(sizeof(float)));
}
BENCHMARK(BM_AttendOnlineSoftmax)->ArgsProduct({{128, 1024, 8192}, {64, 128}});

// The g query heads of one GQA group over n keys (d 64, SmolLM2's layout),
// either one call per head (the keys and values read g times) or one grouped
// call; items are (head, key) pairs.
void BM_AttendGqaGroup(benchmark::State& state) {
  const int64_t n = state.range(0), g = state.range(1), d = 64, stride = 3 * d;
  const bool grouped = state.range(2) != 0;
  const auto k = testing::UniformFloats(size_t(n * stride), 1),
             v = testing::UniformFloats(size_t(n * stride), 2);
  const auto q = testing::UniformFloats(size_t(g * d), 3);
  std::vector<float> out(size_t(g * d));
  for (auto _ : state) {
    if (grouped) {
      AttendOnlineSoftmaxHeads(q.data(), 1, g, d, k.data(), v.data(), n, nullptr, stride, stride, d,
                               d, 0.125f, out.data(), d);
    } else {
      for (int64_t h = 0; h < g; ++h) {
        AttendOnlineSoftmax(q.data() + h * d, k.data(), v.data(), n, nullptr, stride, stride, d, d,
                            0.125f, out.data() + h * d);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n * g);
}
BENCHMARK(BM_AttendGqaGroup)->ArgsProduct({{256, 8192, 65536}, {3}, {0, 1}});

// Every query head of one decode token (SmolLM2: 9 heads, 3 kv heads, d 64)
// over n cached rows, the rows cold: the calls cycle through 240 caches (8
// sequences x 30 layers, as a batched decode step reads them) in huge pages,
// as the CPU backend allocates its KV pool. Either one call per kv head (each
// pass over one head's slice of every row) or one call for all heads (rows
// touched whole, in order); rows of f32 (T = float) or f16 bits (T =
// uint16_t, --kv-type f16). Items are (head, key) pairs.
template <typename T>
void BM_AttendDecodeToken(benchmark::State& state) {
  const int64_t n = state.range(0), kv = 3, group = 3, d = 64, stride = kv * d, caches = 240;
  const bool all_heads = state.range(1) != 0;
  const size_t values = size_t(caches * n * stride);
  cpu::HugePageArena arena;
  auto* k = reinterpret_cast<T*>(*arena.Allocate(values * sizeof(T), "keys"));
  auto* v = reinterpret_cast<T*>(*arena.Allocate(values * sizeof(T), "values"));
  const auto k_values = testing::UniformFloats(values, 1);
  const auto v_values = testing::UniformFloats(values, 2);
  for (size_t i = 0; i < values; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      k[i] = k_values[i];
      v[i] = v_values[i];
    } else {
      k[i] = F32ToF16(k_values[i]);
      v[i] = F32ToF16(v_values[i]);
    }
  }
  const auto q = testing::UniformFloats(size_t(kv * group * d), 3);
  std::vector<float> out(size_t(kv * group * d));
  int64_t c = 0;
  for (auto _ : state) {
    const T* kc = k + c * n * stride;
    const T* vc = v + c * n * stride;
    c = (c + 1) % caches;
    if (all_heads) {
      AttendOnlineSoftmaxHeads(q.data(), kv, group, d, kc, vc, n, nullptr, stride, stride, d, d,
                               0.125f, out.data(), d);
    } else {
      for (int64_t h = 0; h < kv; ++h) {
        AttendOnlineSoftmaxHeads(q.data() + h * group * d, 1, group, d, kc + h * d, vc + h * d, n,
                                 nullptr, stride, stride, d, d, 0.125f, out.data() + h * group * d,
                                 d);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n * kv * group);
}
BENCHMARK(BM_AttendDecodeToken<float>)->ArgsProduct({{64, 160, 512}, {0, 1}});
BENCHMARK(BM_AttendDecodeToken<uint16_t>)->ArgsProduct({{64, 160, 512}, {1}});

// A prefill tile at depth: 16 or 32 consecutive tokens of SmolLM2's attention (9
// heads, 3 kv heads, d 64, f16 rows) over `depth` cached keys plus their own,
// either as one AttendTokens call (arg 1) or token by token through the
// one-query kernels as before it (arg 0: segments and their merge). Items are
// (head, key) pairs.
void BM_AttendPrefillTile(benchmark::State& state) {
  const int64_t depth = state.range(0), tokens = state.range(2), kv = 3, group = 3, d = 64;
  const int64_t n_h = kv * group, stride = kv * d, keys = depth + tokens;
  const bool tiled = state.range(1) != 0;
  std::vector<uint16_t> k(size_t(keys * stride)), v(k.size());
  const auto kf = testing::UniformFloats(k.size(), 1), vf = testing::UniformFloats(v.size(), 2);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = F32ToF16(kf[i]);
    v[i] = F32ToF16(vf[i]);
  }
  const auto q = testing::UniformFloats(size_t(tokens * n_h * d), 3);
  std::vector<float> out(size_t(tokens * n_h * d));
  std::vector<float> scratch(size_t(std::max(
      AttendTokensScratch(tokens, depth + 1, kv, group, d, d, kAttentionSegmentKeys),
      AttentionSegments(keys) * n_h * (d + 2))));
  for (auto _ : state) {
    if (tiled) {
      AttendTokens(q.data(), n_h * d, tokens, depth + 1, kv, group, DType::kF16, k.data(),
                   v.data(), nullptr, stride, stride, d, d, 0.125f, kAttentionSegmentKeys,
                   out.data(), n_h * d, scratch.data());
    } else {
      for (int64_t i = 0; i < tokens; ++i) {
        const int64_t n = depth + 1 + i, segments = AttentionSegments(n);
        float* parts = scratch.data();
        float* maxes = parts + segments * n_h * d;
        for (int64_t s = 0; s < segments; ++s) {
          AttendSegment(q.data() + i * n_h * d, kv, group, d, k.data(), v.data(), n, nullptr, s,
                        stride, stride, d, d, 0.125f, parts + s * n_h * d, maxes + s * n_h,
                        maxes + segments * n_h + s * n_h);
        }
        MergeSegments(parts, n_h * d, maxes, maxes + segments * n_h, segments, n_h, d,
                      out.data() + i * n_h * d, d);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * tokens * n_h * (depth + tokens / 2));
}
BENCHMARK(BM_AttendPrefillTile)->ArgsProduct({{4096}, {0, 1}, {16, 32}});

void BM_SiluMul(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  auto gate = testing::UniformFloats(n, 1);
  const auto up = testing::UniformFloats(n, 2);
  std::vector<float> out(n);
  for (auto _ : state) {
    SiluMul(gate.data(), up.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(BM_SiluMul)->Arg(1536)->Arg(128 * 1536);

void BM_DotF32(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const auto a = testing::UniformFloats(n, 1), b = testing::UniformFloats(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(DotF32(a.data(), b.data(), n));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * n * sizeof(float)));
}
BENCHMARK(BM_DotF32)->Arg(64)->Arg(576)->Arg(4096);

void BM_AxpyF32(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const auto x = testing::UniformFloats(n, 1);
  auto y = testing::UniformFloats(n, 2);
  for (auto _ : state) {
    AxpyF32(0.5f, x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * n * sizeof(float)));
}
BENCHMARK(BM_AxpyF32)->Arg(64)->Arg(576)->Arg(4096);

// RMSNorm of a batched decode step's rows (SmolLM2 576, GLM-4.5-Air 4096): on
// the step's critical path, one row per call.
void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = 8, n = state.range(0);
  const auto x = testing::UniformFloats(size_t(rows * n), 1);
  const auto w = testing::UniformFloats(size_t(n), 2);
  std::vector<float> out(size_t(rows * n));
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      RmsNormRow(x.data() + r * n, w.data(), 1e-5f, n, out.data() + r * n);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * rows * n);
}
BENCHMARK(BM_RmsNorm)->Arg(576)->Arg(4096);

// x [t, k] to int8 blocks of 32 with scales and sums, once per matmul call.
void BM_QuantizeActivations(benchmark::State& state) {
  const int64_t t = state.range(0), k = state.range(1);
  const auto x = testing::UniformFloats(size_t(t * k), 1);
  auto buffer = hwy::AllocateAligned<uint8_t>(QuantizedActivationBytes(DType::kQ8_0, t, k));
  for (auto _ : state) {
    QuantizeActivations(DType::kQ8_0, x.data(), t, k, buffer.get());
    benchmark::DoNotOptimize(buffer.get());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * t * k);
}
BENCHMARK(BM_QuantizeActivations)->ArgsProduct({{1, 128}, {576, 1536}});

}  // namespace
}  // namespace anymoe::kernels
