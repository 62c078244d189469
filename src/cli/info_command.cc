// `anymoe info`: what a model file holds and what running it will cost, read
// from the file alone (no weights are touched).
#include <cstdio>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "models/config_loader.h"
#include "models/model_stats.h"

namespace anymoe::cli {
namespace {

struct InfoFlags {
  std::string model_path;
  int64_t context = 4096;
  int64_t max_step_tokens = 128;
};

std::string Human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s%s", v, prefixes[i], unit);
  return buf;
}

std::string Gib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

int Info(const InfoFlags& f) {
  auto file = OpenModelFile(f.model_path);
  if (!file.ok()) return ReportError(file.status());
  auto config = LoadModelConfig(*file);
  if (!config.ok()) return ReportError(config.status());
  const ModelConfig& c = *config;
  const ParameterCounts params = CountParameters(c, file->tensors());
  const int64_t ctx = std::min(f.context, c.max_position_embeddings);

  std::printf("model:        %s (%s)\n", f.model_path.c_str(),
              file->format == ModelFormat::kGguf ? "gguf" : "hf safetensors");
  std::printf("architecture: %s\n", c.arch.c_str());
  std::printf("layers:       %lld\n", static_cast<long long>(c.num_layers));
  std::printf("hidden:       %lld, ffn %lld, vocab %lld\n", static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size));
  std::printf("attention:    %lld query heads, %lld kv heads, head dim %lld\n",
              static_cast<long long>(c.num_heads), static_cast<long long>(c.num_kv_heads),
              static_cast<long long>(c.head_dim));
  std::printf("experts:      none (dense)\n");
  std::printf("rope:         theta %g, %lld rotary dims, scaling %s (factor %g)\n", c.rope_theta,
              static_cast<long long>(c.rotary_dims), RopeScalingName(c.rope_scaling.type).c_str(),
              c.rope_scaling.factor);
  std::printf("context:      %lld max positions\n",
              static_cast<long long>(c.max_position_embeddings));
  std::printf("parameters:   %s total, %s active per token\n", Human(double(params.total), "").c_str(),
              Human(double(params.active), "").c_str());
  std::printf("tensors:\n");
  uint64_t weight_bytes = 0;
  for (const auto& [dtype, u] : SummarizeDTypes(file->tensors())) {
    std::printf("  %-6s %5lld tensors %14lld elements %12s\n", dtype.c_str(),
                static_cast<long long>(u.tensors), static_cast<long long>(u.elements),
                Gib(u.bytes).c_str());
    weight_bytes += u.bytes;
  }
  const uint64_t kv = KvBytesPerToken(c) * uint64_t(ctx);
  const uint64_t act = ActivationBytes(c, f.max_step_tokens);
  std::printf("memory:       weights %s (mmap) + KV cache %s (%lld tokens, %llu bytes/token)\n",
              Gib(weight_bytes).c_str(), Gib(kv).c_str(), static_cast<long long>(ctx),
              static_cast<unsigned long long>(KvBytesPerToken(c)));
  std::printf("              + activations %s = %s\n", Gib(act).c_str(),
              Gib(weight_bytes + kv + act).c_str());
  return 0;
}

}  // namespace

CommandFn RegisterInfo(CLI::App& cmd) {
  auto f = std::make_shared<InfoFlags>();
  cmd.add_option("-m,--model", f->model_path, "GGUF file or HF model folder")->required();
  cmd.add_option("-c,--ctx", f->context, "context length to size the KV cache for");
  cmd.add_option("--batch", f->max_step_tokens, "prompt tokens per forward step");
  return [f] { return Info(*f); };
}

}  // namespace anymoe::cli
