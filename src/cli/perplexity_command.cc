// `anymoe perplexity`: the quality meter. Perplexity of a model on a text, as
// llama-perplexity measures it (second half of each chunk scored), with
// --kl-divergence-base FILE saving the run's log-probabilities and
// --kl-divergence comparing a run against such a file (KLD mean, percentiles,
// same top token), so quantised files can be ranked against their f16 base.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "runtime/perplexity.h"

namespace anymoe::cli {
namespace {

// A text every Debian machine has, so anyone can rerun a measurement.
constexpr char kDefaultText[] = "/usr/share/common-licenses/GPL-3";

struct PerplexityFlags {
  EngineOptions engine;
  std::string text_path = kDefaultText;
  int64_t chunks = -1;
  std::string kld_base;
  bool kld = false;
};


void PrintChunk(int64_t chunk, double ppl) {
  std::fprintf(stderr, "[%lld]%.4f,", (long long)chunk + 1, ppl);
  std::fflush(stderr);
}

int Perplexity(PerplexityFlags f) {
  if (Status st = SingleProcessOnly("perplexity"); !st.ok()) return ReportError(st);
  if (f.kld && f.kld_base.empty()) {
    return ReportError(Status::Error("--kl-divergence needs --kl-divergence-base FILE"));
  }
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  const Tokenizer& tok = engine->tokenizer();
  const int32_t bos = tok.add_bos_default() ? tok.bos_id() : -1;
  Expected<PerplexityResult> result = Status::Error("unset");
  if (f.kld) {
    result = MeasureKlDivergence(engine->model(), f.kld_base, bos, PrintChunk);
  } else {
    auto text = ReadText(f.text_path);
    if (!text.ok()) return ReportError(text.status());
    const std::vector<int32_t> tokens = tok.Encode(*text, tok.add_bos_default(), false);
    PerplexityOptions options;
    options.context = engine->context();
    options.chunks = f.chunks;
    options.bos_id = bos;
    options.save_base = f.kld_base;
    std::fprintf(stderr, "perplexity: %zu tokens, %lld per chunk\n", tokens.size(),
                 (long long)options.context);
    result = MeasurePerplexity(engine->model(), tokens, options, PrintChunk);
  }
  std::fprintf(stderr, "\n");
  if (!result.ok()) return ReportError(result.status());
  const PerplexityResult& r = *result;
  std::printf("chunks %lld x %lld tokens, %lld scored\n", (long long)r.chunks,
              (long long)r.context, (long long)r.scored);
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl.value, r.ppl.error);
  if (r.kld) {
    const KlDivergenceStats& k = *r.kld;
    std::printf("PPL(base)          : %.6f +/- %.6f\n", k.ppl_base.value, k.ppl_base.error);
    std::printf("ln(PPL(Q)/PPL(base)): %.6f +/- %.6f\n", k.ln_ppl_ratio.value,
                k.ln_ppl_ratio.error);
    std::printf("Mean    KLD: %.6f +/- %.6f\n", k.kld.value, k.kld.error);
    std::printf("Maximum KLD: %.6f\n", k.kld_max);
    std::printf("99.9%%   KLD: %.6f\n", k.kld_p999);
    std::printf("99.0%%   KLD: %.6f\n", k.kld_p99);
    std::printf("Median  KLD: %.6f\n", k.kld_median);
    std::printf("RMS Δp    : %.3f +/- %.3f %%\n", 100 * k.rms_dp.value, 100 * k.rms_dp.error);
    std::printf("Same top p: %.3f +/- %.3f %%\n", 100 * k.same_top.value, 100 * k.same_top.error);
  }
  return 0;
}

}  // namespace

CommandFn RegisterPerplexity(CLI::App& cmd) {
  auto f = std::make_shared<PerplexityFlags>();
  f->engine.context = 512;
  AddEngineOptions(cmd, f->engine);
  cmd.add_option("-f,--file", f->text_path, "text to score (default: the GPL-3 text)");
  cmd.add_option("--chunks", f->chunks, "score at most N chunks of -c tokens (default: all)");
  cmd.add_option("--kl-divergence-base", f->kld_base,
                 "without --kl-divergence: save this run's log-probabilities here (16-bit, "
                 "llama-perplexity's layout); with it: the base to compare against");
  cmd.add_flag("--kl-divergence", f->kld,
               "compare this run with --kl-divergence-base (KLD, same top token)");
  return [f] { return Perplexity(*f); };
}

}  // namespace anymoe::cli
