// `anymoe profile`: the expert profile of a corpus (runtime/expert_profile.h).
// The text runs through the model in chunks of -c tokens exactly as
// `anymoe perplexity` runs it (so the perplexity comes for free and is
// printed); every token of every chunk is profiled. The profile feeds
// --expert-profile (warm start, pinning) and docs/expert-profiles.md.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "models/model_fingerprint.h"
#include "runtime/expert_profile.h"
#include "runtime/perplexity.h"

namespace anymoe::cli {
namespace {

struct ProfileFlags {
  EngineOptions engine;
  std::string text_path = "/usr/share/common-licenses/GPL-3";
  int64_t chunks = -1;
  std::string out;
};

// One line per MoE layer: experts used, and the share of selections the
// busiest quarter of the experts took (how much a cache of that size holds).
void PrintSummary(const ExpertProfile& p) {
  std::fprintf(stderr, "profile: %lld tokens, %zu MoE layers, %lld experts, top-%lld\n",
               (long long)p.tokens, p.layers.size(), (long long)p.num_experts,
               (long long)p.experts_per_token);
  for (const LayerProfile& l : p.layers) {
    std::vector<int64_t> sorted = l.tokens_routed;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    int64_t total = 0, used = 0, top = 0;
    const size_t quarter = std::max<size_t>(1, sorted.size() / 4);
    for (size_t i = 0; i < sorted.size(); ++i) {
      total += sorted[i];
      used += sorted[i] > 0;
      if (i < quarter) top += sorted[i];
    }
    std::fprintf(stderr, "  layer %3lld: %lld of %lld experts used, top 25%% take %.1f %%\n",
                 (long long)l.layer, (long long)used, (long long)p.num_experts,
                 total ? 100.0 * double(top) / double(total) : 0.0);
  }
}

int Profile(const ProfileFlags& f) {
  if (Status st = SingleProcessOnly("profile"); !st.ok()) return ReportError(st);
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  const ModelConfig& config = engine->model().config();
  if (!config.is_moe()) {
    return ReportError(Status::Error(f.engine.model_path + " has no routed experts to profile"));
  }
  auto text = ReadText(f.text_path);
  if (!text.ok()) return ReportError(text.status());
  const Tokenizer& tok = engine->tokenizer();
  const std::vector<int32_t> tokens = tok.Encode(*text, tok.add_bos_default(), false);
  ExpertProfiler profiler(config, f.engine.model_path, ModelFingerprint(engine->file()),
                          "corpus " + f.text_path);
  engine->model().SetObserver(&profiler.observer());
  PerplexityOptions options;
  options.context = engine->context();
  options.chunks = f.chunks;
  options.bos_id = tok.add_bos_default() ? tok.bos_id() : -1;
  std::fprintf(stderr, "profile: %zu tokens of %s, %lld per chunk\n", tokens.size(),
               f.text_path.c_str(), (long long)options.context);
  auto result = MeasurePerplexity(engine->model(), tokens, options, [](int64_t chunk, double) {
    std::fprintf(stderr, "[%lld]", (long long)chunk + 1);
    std::fflush(stderr);
  });
  std::fprintf(stderr, "\n");
  engine->model().SetObserver(nullptr);
  if (!result.ok()) return ReportError(result.status());
  const ExpertProfile profile = profiler.Snapshot();
  if (Status st = profile.Write(f.out); !st.ok()) return ReportError(st);
  PrintSummary(profile);
  std::printf("wrote %s: %lld tokens in %lld chunks (PPL %.4f)\n", f.out.c_str(),
              (long long)profile.tokens, (long long)result->chunks, result->ppl.value);
  return 0;
}

}  // namespace

CommandFn RegisterProfile(CLI::App& cmd) {
  auto f = std::make_shared<ProfileFlags>();
  f->engine.context = 512;
  AddEngineOptions(cmd, f->engine);
  cmd.add_option("-f,--file", f->text_path, "corpus to profile (default: the GPL-3 text)");
  cmd.add_option("--chunks", f->chunks, "profile at most N chunks of -c tokens (default: all)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd.add_option("-o,--output", f->out, "write the profile to FILE.json")->required();
  return [f] { return Profile(*f); };
}

}  // namespace anymoe::cli
