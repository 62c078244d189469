// Micro-benchmarks of the quantised matmul kernels on SmolLM2-135M's decode shapes,
// one thread, reported as GB/s of weight bytes, next to this machine's streaming
// read bandwidth (the ceiling for t = 1 when the weights come from DRAM).
//   kernel_bench [--cpu_target=avx2|avx2-vnni|avx512-vnni|...] [google benchmark flags]
// "hot" reuses one copy of W (cache-resident for the small shapes); "cold" cycles
// through copies totalling > 256 MiB, so every call streams W from DRAM as a real
// decode step does.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/dot.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "core/half.h"
#include "hwy/aligned_allocator.h"

namespace anymoe::kernels {
namespace {

constexpr size_t kColdBytes = size_t(256) << 20;

std::vector<uint8_t> RandomWeights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const uint64_t bytes = BytesFor(t, uint64_t(rows * cols)).value();
  std::vector<uint8_t> b(bytes);
  for (auto& x : b) x = uint8_t(rng());
  if (t == DType::kF16 || t == DType::kBF16) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < bytes / 2; ++i) {
      const uint16_t h = t == DType::kF16 ? F32ToF16(u(rng)) : F32ToBF16(u(rng));
      std::memcpy(&b[i * 2], &h, 2);
    }
    return b;
  }
  const size_t scale_offset = t == DType::kQ6_K ? 208 : t == DType::kQ2_K ? 80 : t == DType::kQ3_K ? 108 : 0;
  const size_t block_bytes = size_t(Info(t).block_bytes);
  for (size_t blk = 0; blk < bytes / block_bytes; ++blk) {
    if (t == DType::kMXFP4) {  // an e8m0 exponent byte
      b[blk * block_bytes] = 120;
      continue;
    }
    const uint16_t h = F32ToF16(0.01f);
    std::memcpy(&b[blk * block_bytes + scale_offset], &h, 2);
    if (t == DType::kQ4_1 || t == DType::kQ4_K || t == DType::kQ5_1 || t == DType::kQ2_K) {
      std::memcpy(&b[blk * block_bytes + scale_offset + 2], &h, 2);
    }
  }
  return b;
}

// y[t, n] = x[t, k] . W[n, k]^T including the activation quantisation, as one
// matmul call does; `panels`: W stored in the panel layout (panel_layout.h).
void BM_QuantMatmul(benchmark::State& state, DType type, int64_t k, int64_t n, int64_t t,
                    bool cold, bool panels) {
  const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
  const size_t w_bytes = row_bytes * size_t(n);
  const size_t copies = cold ? (kColdBytes + w_bytes - 1) / w_bytes : 1;
  std::vector<uint8_t> w = RandomWeights(type, n, k, 1);
  if (panels) {
    std::vector<uint8_t> file = w;
    PackPanels(type, file.data(), n, k, w.data());
  }
  w.resize(w_bytes * copies);
  for (size_t c = 1; c < copies; ++c) std::memcpy(&w[c * w_bytes], w.data(), w_bytes);
  std::vector<float> x(size_t(t * k));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  auto qx = hwy::AllocateAligned<uint8_t>(QuantizedActivationBytes(type, t, k));
  std::vector<float> y(size_t(t * n));
  size_t c = 0;
  for (auto _ : state) {
    QuantizeActivations(type, x.data(), t, k, qx.get());
    if (panels) {
      PanelMatmulRows(type, w.data() + c * w_bytes, row_bytes, qx.get(), t, k, 0, n, y.data(), n);
    } else {
      QuantMatmulRows(type, w.data() + c * w_bytes, row_bytes, qx.get(), t, k, 0, n, y.data(), n);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    c = c + 1 == copies ? 0 : c + 1;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w_bytes));
  state.counters["GMAC/s"] = benchmark::Counter(double(t) * double(n) * double(k) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Streaming read of `bytes` (f32 dot of the two halves): the memory bandwidth one
// core gets at that working-set size.
void BM_ReadBandwidth(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  const size_t n = bytes / sizeof(float) / 2;
  auto a = hwy::AllocateAligned<float>(2 * n);
  for (size_t i = 0; i < 2 * n; ++i) a[i] = float(i % 7);
  for (auto _ : state) benchmark::DoNotOptimize(DotF32(a.get(), a.get() + n, n));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

// PackPanels on one expert matrix, as a streamed expert's I/O thread runs it
// after each read: the source cycles through copies totalling > 256 MiB (a
// freshly read buffer is not in cache), into one destination.
void BM_PackPanels(benchmark::State& state, DType type, int64_t k, int64_t n) {
  const size_t bytes = BytesFor(type, uint64_t(n * k)).value();
  const size_t copies = (kColdBytes + bytes - 1) / bytes;
  std::vector<uint8_t> w = RandomWeights(type, n, k, 1);
  w.resize(bytes * copies);
  for (size_t c = 1; c < copies; ++c) std::memcpy(&w[c * bytes], w.data(), bytes);
  std::vector<uint8_t> out(bytes);
  size_t c = 0;
  for (auto _ : state) {
    PackPanels(type, w.data() + c * bytes, n, k, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    c = c + 1 == copies ? 0 : c + 1;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

struct Shape {
  const char* name;
  int64_t k, n;
};

void RegisterAll() {
  // SmolLM2-135M: hidden 576, ffn 1536, vocabulary 49152.
  const Shape shapes[] = {{"k576_n1536", 576, 1536},     // gate / up
                          {"k576_n576", 576, 576},       // q / o (k / v are n=192)
                          {"k1536_n576", 1536, 576},     // down
                          {"k576_n49152", 576, 49152}};  // lm head
  const DType types[] = {DType::kQ8_0,  DType::kQ4_0,   DType::kQ4_1,  DType::kQ4_K,
                         DType::kQ6_K,  DType::kF16,    DType::kBF16,  DType::kQ5_0,
                         DType::kQ5_1,  DType::kQ2_K,   DType::kQ3_K,  DType::kIQ4_NL,
                         DType::kIQ4_XS, DType::kIQ2_XXS, DType::kMXFP4, DType::kQ5_K,
                         DType::kIQ2_XS, DType::kIQ2_S,  DType::kIQ3_XXS, DType::kIQ3_S,
                         DType::kIQ1_S,  DType::kIQ1_M};
  for (DType type : types) {
    for (const Shape& s : shapes) {
      // q4_k / q6_k need k % 256 == 0: SmolLM2's 576 is not, so use 512 there
      // (llama.cpp falls back to q5_0 / q8_0 for such tensors).
      const int64_t k = Info(type).block_elems == 256 && s.k % 256 ? s.k / 256 * 256 : s.k;
      for (int64_t t : {1, 2, 4, 8, 128}) {
        for (bool cold : {false, true}) {
          for (bool panels : {false, true}) {
            if ((cold && t > 8) || (panels && !HasPanelKernels(type))) continue;
            const std::string name = std::string(panels ? "PanelMatmul/" : "QuantMatmul/") +
                                     std::string(Name(type)) + "/k" + std::to_string(k) + "_n" +
                                     std::to_string(s.n) + "/t" + std::to_string(t) +
                                     (cold ? "/cold" : "/hot");
            benchmark::RegisterBenchmark(name.c_str(), BM_QuantMatmul, type, k, s.n, t, cold,
                                         panels)
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
  // Expert matrices: the GLM-4.5-shaped mini bench file (hidden 1024, expert
  // ffn 512) and GLM-4.5-Air (hidden 4096, expert ffn 1408), gate/up and down.
  const Shape experts[] = {{"k1024_n512", 1024, 512},
                           {"k512_n1024", 512, 1024},
                           {"k4096_n1408", 4096, 1408},
                           {"k1408_n4096", 1408, 4096}};
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    for (const Shape& s : experts) {
      const std::string name = std::string("PackPanels/") + std::string(Name(type)) + "/" + s.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_PackPanels, type, s.k, s.n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)
      ->Arg(int64_t(256) << 10)   // L2
      ->Arg(int64_t(8) << 20)     // L3
      ->Arg(int64_t(512) << 20);  // DRAM
}

}  // namespace
}  // namespace anymoe::kernels

int main(int argc, char** argv) {
  // --cpu_target=NAME: the kernels' SIMD target (kernels/cpu_target.h), as
  // anymoe --cpu-target, to compare paths on one machine.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const char* prefix = "--cpu_target=";
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) != 0) {
      args.push_back(argv[i]);
      continue;
    }
    if (const anymoe::Status st = anymoe::kernels::SelectCpuTarget(argv[i] + std::strlen(prefix));
        !st.ok()) {
      std::fprintf(stderr, "kernel_bench: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "kernel_bench: cpu target %s\n",
               anymoe::kernels::ActiveCpuTarget().name.c_str());
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  anymoe::kernels::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
