// Micro-benchmarks of byte-level BPE encoding and decoding on the SmolLM2
// tokenizer (tests/golden): English prose (the GPL-3 text every Debian machine
// has) and the hostile case of one character repeated, where the whole input is
// a single pre-tokenizer word and the merge loop sees n symbols at once.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

const Tokenizer& SmolLm2() {
  static const auto tok = [] {
    auto t = Tokenizer::FromHfJson(
        std::string(ANYMOE_GOLDEN_DIR) + "/tokenizer/smollm2_small.tokenizer.json", "");
    if (!t.ok()) std::abort();
    return std::move(t).value();
  }();
  return *tok;
}

std::string Prose(size_t bytes) {
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) std::abort();
  std::string out;
  while (out.size() < bytes) out += text;
  out.resize(bytes);
  return out;
}

void BM_EncodeProse(benchmark::State& state) {
  const std::string text = Prose(size_t(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(SmolLm2().Encode(text, false, false));
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeProse)->Arg(64 << 10);

void BM_EncodeOneLongWord(benchmark::State& state) {
  const std::string text(size_t(state.range(0)), 'a');
  for (auto _ : state) benchmark::DoNotOptimize(SmolLm2().Encode(text, false, false));
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeOneLongWord)->Arg(16 << 10)->Arg(128 << 10);

void BM_DecodeProse(benchmark::State& state) {
  const std::vector<int32_t> ids = SmolLm2().Encode(Prose(size_t(state.range(0))), false, false);
  for (auto _ : state) benchmark::DoNotOptimize(SmolLm2().Decode(ids));
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_DecodeProse)->Arg(64 << 10);

}  // namespace
}  // namespace anymoe
