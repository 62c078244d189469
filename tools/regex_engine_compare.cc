// Compares the two Debian regex engines that could run tokenizer.json Split
// patterns: PCRE2 (JIT) and Oniguruma (what HF tokenizers links). For each
// pattern it splits a 1 MiB mixed text (the golden corpus repeated, plus
// English prose) with both, checks they find the same matches, and prints
// MiB/s on one thread. Used once to choose the engine for issue 47. Measured
// 2026-12-07 (2-core dev VM, busy): PCRE2 10.42 JIT 43.0 / 44.2 / 40.7 MiB/s,
// Oniguruma 6.9.8 15.2 / 15.6 / 14.3 MiB/s for llama3 / deepseek-v3 / gpt-4o,
// identical matches (227,370 / 216,634 / 225,269); a quieter rerun gave
// 78.6 / 83.3 / 70.4 against 23.7 / 29.6 / 25.1. PCRE2 JIT is ~3x faster.
//
// Build and run (from the repository root):
//   apt-get install libpcre2-dev libonig-dev   # scripts/install-deps.sh has the first
//   g++ -O2 -std=c++20 tools/regex_engine_compare.cc -o /tmp/regex_engine_compare
//       $(pkg-config --cflags --libs libpcre2-8 oniguruma)   (one line)
//   /tmp/regex_engine_compare tests/golden/tokenizer/corpus.json
#define PCRE2_CODE_UNIT_WIDTH 8
#include <oniguruma.h>
#include <pcre2.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using Spans = std::vector<std::pair<size_t, size_t>>;

struct Pattern {
  const char* name;
  const char* pcre2;  // PCRE2 spelling
  const char* onig;   // Oniguruma (Ruby syntax) spelling, as tokenizer.json writes it
};

// The patterns of the real files, as their tokenizer.json / llama.cpp write them.
const Pattern kPatterns[] = {
    {"llama3",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"deepseek-v3 (3rd split)",
     R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"gpt-4o (o200k)",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

Spans Pcre2All(const char* pattern, const std::string& text, double* seconds) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off,
                                 nullptr);
  if (re == nullptr) {
    std::fprintf(stderr, "pcre2 compile error %d at %zu\n", err, size_t(off));
    std::exit(1);
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  Spans spans;
  const auto t0 = std::chrono::steady_clock::now();
  size_t at = 0;
  const auto* s = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (at < text.size()) {
    const int rc = pcre2_jit_match(re, s, text.size(), at, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    spans.emplace_back(ov[0], ov[1]);
    at = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return spans;
}

Spans OnigAll(const char* pattern, const std::string& text, double* seconds) {
  regex_t* re = nullptr;
  OnigErrorInfo einfo;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern);
  if (onig_new(&re, p, p + std::strlen(pattern), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
               ONIG_SYNTAX_RUBY, &einfo) != ONIG_NORMAL) {
    std::fprintf(stderr, "onig compile error\n");
    std::exit(1);
  }
  OnigRegion* region = onig_region_new();
  Spans spans;
  const auto* s = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = s + text.size();
  const auto t0 = std::chrono::steady_clock::now();
  size_t at = 0;
  while (at < text.size()) {
    const int r = onig_search(re, s, end, s + at, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;
    spans.emplace_back(size_t(region->beg[0]), size_t(region->end[0]));
    at = region->end[0] > region->beg[0] ? size_t(region->end[0]) : size_t(region->end[0]) + 1;
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  onig_region_free(region, 1);
  onig_free(re);
  return spans;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s corpus.json\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto corpus = nlohmann::json::parse(ss.str())["strings"].get<std::vector<std::string>>();
  std::ifstream gpl("/usr/share/common-licenses/GPL-3");
  std::stringstream prose;
  prose << gpl.rdbuf();
  std::string text;
  while (text.size() < (size_t{1} << 20)) {
    for (const std::string& s : corpus) text += s + "\n";
    text += prose.str();
  }
  text.resize(size_t{1} << 20);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
  onig_initialize(encodings, 1);
  const double mib = double(text.size()) / (1 << 20);
  for (const Pattern& p : kPatterns) {
    double tp = 0, to = 0;
    const Spans a = Pcre2All(p.pcre2, text, &tp);
    const Spans b = OnigAll(p.onig, text, &to);
    size_t diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff += a[i] != b[i];
    std::printf("%-24s pcre2-jit %7.1f MiB/s  oniguruma %6.1f MiB/s  matches %zu / %zu, %zu differ\n",
                p.name, mib / tp, mib / to, a.size(), b.size(), diff);
  }
  onig_end();
  return 0;
}
