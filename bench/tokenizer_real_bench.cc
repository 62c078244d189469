// Encode speed of real tokenizer files on 1 MiB of mixed text, one thread, for
// tools/bench_tokenizers.py, which runs these interleaved with HF `tokenizers`
// and tiktoken on the same text and files and checks the token counts agree.
// The text: the strings of tests/golden/tokenizer/corpus_large.json (every
// script, emoji, code, whitespace runs, text around special tokens) joined by
// '\n' and repeated up to 1 MiB, cut at a character boundary; the script
// builds it the same way. Files (each case is left out when absent):
//   deepseek-v3   models/real-tokenizers/deepseek-v3 (three PCRE2 Split stages)
//   kimi-k2       a tiktoken folder around models/real-tokenizers/qwen-tiktoken
//                 with the built-in kimi-k2 pattern (PCRE2)
//   llama3        models/real-tokenizers/llama3 (the hand-written llama3 scanner)
//   qwen2         tests/golden/tokenizer/qwen2.tokenizer.json (the qwen2 scanner
//                 and NFC; a reduced vocabulary)
//   sentencepiece tests/golden/tokenizer/mixtral.tokenizer.json (Mixtral's
//                 32,000-token SentencePiece BPE with byte fallback)
// ANYMOE_BENCH_TOKENIZER_TEXT=FILE encodes that file's text instead.
// Counters: tokens (the count the script compares) and tokens_per_s.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_files.h"

namespace anymoe {
namespace {

namespace fs = std::filesystem;

std::string MixedText() {
  // Set by tools/bench_tokenizers.py --once: the corpus once, no repeats.
  if (const char* path = std::getenv("ANYMOE_BENCH_TOKENIZER_TEXT")) {
    std::ifstream file(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  std::ifstream in(std::string(ANYMOE_GOLDEN_DIR) + "/tokenizer/corpus_large.json");
  const nlohmann::json corpus = nlohmann::json::parse(in);
  std::string joined;
  for (const auto& c : corpus["cases"]) joined += c["text"].get<std::string>() + "\n";
  constexpr size_t kBytes = size_t(1) << 20;
  std::string text;
  while (text.size() < kBytes) text += joined;
  size_t cut = kBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text;
}

// The kimi-k2 case's folder: tiktoken.model only (no config, no
// tokenization_kimi.py), so the loader uses its built-in kimi-k2 pattern.
// Removed at exit.
std::string KimiFolder(const std::string& ranks) {
  static const fs::path dir =
      fs::temp_directory_path() / ("anymoe_bench_kimi_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(ranks, dir / "tiktoken.model", fs::copy_options::overwrite_existing);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(dir, ec);
  });
  return dir.string();
}

struct Case {
  const char* name;
  std::string path;  // a folder (TokenizerFromFolder), a tiktoken.model or a tokenizer.json
};

// Loaded on first use, not while static objects are being built (the loaders
// read tables of other translation units).
const Tokenizer& Load(const Case& c) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::unique_ptr<Tokenizer>& slot = loaded[c.name];
  if (slot) return *slot;
  Expected<std::unique_ptr<Tokenizer>> tok =
      fs::is_directory(c.path)             ? TokenizerFromFolder(c.path)
      : std::string(c.name) == "kimi-k2" ? Tokenizer::FromTiktokenFolder(KimiFolder(c.path))
                                         : Tokenizer::FromHfJson(c.path, "");
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_real_bench: %s: %s\n", c.name, tok.status().message().c_str());
    std::abort();
  }
  slot = std::move(tok).value();
  return *slot;
}

void BM_EncodeMixed1MiB(benchmark::State& state, const Case* c) {
  static const std::string text = MixedText();
  const Tokenizer& tok = Load(*c);
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok.Encode(text, false, true);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(tokens);
  state.counters["tokens_per_s"] =
      benchmark::Counter(double(tokens) * double(state.iterations()), benchmark::Counter::kIsRate);
}

const bool registered = [] {
  const std::string real = std::string(ANYMOE_MODELS_DIR) + "/real-tokenizers/";
  const std::string golden = std::string(ANYMOE_GOLDEN_DIR) + "/tokenizer/";
  static const std::vector<Case> cases = {
      {"deepseek-v3", real + "deepseek-v3"},
      {"kimi-k2", real + "qwen-tiktoken/tiktoken.model"},
      {"llama3", real + "llama3"},
      {"qwen2", golden + "qwen2.tokenizer.json"},
      {"sentencepiece", golden + "mixtral.tokenizer.json"}};
  for (const Case& c : cases) {
    if (!fs::exists(c.path)) continue;
    benchmark::RegisterBenchmark((std::string("BM_EncodeMixed1MiB/") + c.name).c_str(),
                                 BM_EncodeMixed1MiB, &c)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
}  // namespace anymoe
