// `anymoe info`: what a model holds and what running it will cost, from the
// file's metadata alone (no weights are read). `-m config.json` describes a
// model from its HF config only, e.g. to size a 744B model before downloading.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "models/config_loader.h"
#include "models/memory_plan.h"
#include "models/model_stats.h"
#include "models/mtp_block.h"
#include "models/tensor_names.h"
#include "runtime/expert_streaming.h"
#include "runtime/scheduler.h"

namespace anymoe::cli {
namespace {

struct InfoFlags {
  std::string model_path;
  std::string mtp_path;
  int64_t context = 4096;
  MlaForm mla_form = MlaForm::kAbsorbed;
  ExpertStreamingOptions experts;
  std::string backend = "cpu";  // a device backend: also its plan under mem_budget
  int device = 0;
  uint64_t mem_budget = 0;
  ExpertPruneOptions prune;
  std::optional<ExpertSubset> subset;  // --expert-prune, resolved
};

std::string Count(double v) {
  const char* suffix[] = {"", "K", "M", "B", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f%s", v, suffix[i]);
  return buf;
}

std::string Gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f GiB", bytes / double(uint64_t(1) << 30));
  return buf;
}

void PrintArchitecture(const ModelConfig& c) {
  std::printf("architecture: %s\n", c.arch.c_str());
  std::printf("layers:       %lld (%lld dense, %lld MoE)\n", (long long)c.num_layers,
              (long long)(c.num_layers - c.num_moe_layers()), (long long)c.num_moe_layers());
  std::printf("hidden:       %lld, dense ffn %lld, vocab %lld\n", (long long)c.hidden_size,
              (long long)c.intermediate_size, (long long)c.vocab_size);
  if (c.attention == AttentionKind::kMla) {
    const MlaConfig& m = c.mla;
    std::printf("attention:    MLA, %lld heads, q_lora %lld, kv_lora %lld, qk %lld+%lld, v %lld\n",
                (long long)c.num_heads, (long long)m.q_lora_rank, (long long)m.kv_lora_rank,
                (long long)m.qk_nope_head_dim, (long long)m.qk_rope_head_dim,
                (long long)m.v_head_dim);
  } else {
    std::printf("attention:    GQA, %lld query heads, %lld kv heads, head dim %lld%s%s\n",
                (long long)c.num_heads, (long long)c.num_kv_heads, (long long)c.head_dim,
                c.qk_norm ? ", qk-norm" : "", c.attention_bias ? ", qkv bias" : "");
  }
  if (c.dsa.topk > 0) {
    // Counted by kind: a layer without an indexer (glm5_next's KDA layers,
    // IndexerKind::kNone) is neither full nor shared.
    int64_t full = 0, shared = 0;
    for (IndexerKind k : c.indexer_kinds) {
      full += k == IndexerKind::kFull;
      shared += k == IndexerKind::kShared;
    }
    std::printf(
        "sparse attn:  DSA, %lld indexer heads x %lld, top-%lld keys, %lld full / %lld "
        "shared indexer layers\n",
        (long long)c.dsa.n_heads, (long long)c.dsa.head_dim, (long long)c.dsa.topk, (long long)full,
        (long long)shared);
  }
  if (c.is_moe()) {
    const MoeConfig& m = c.moe;
    std::printf(
        "experts:      %lld routed (top-%lld, ffn %lld), shared ffn %lld, %s router%s, "
        "top %lld of %lld groups, scaling %g\n",
        (long long)m.num_experts, (long long)m.experts_per_token, (long long)m.expert_ffn,
        (long long)m.shared_ffn, m.scoring == MoeConfig::Scoring::kSigmoid ? "sigmoid" : "softmax",
        m.selection_bias ? " + selection bias" : "", (long long)m.topk_group, (long long)m.n_group,
        m.routed_scaling_factor);
  } else {
    std::printf("experts:      none (dense)\n");
  }
  std::printf("rope:         theta %g, %lld rotary dims, %s pairs, scaling %s (factor %g)\n",
              c.rope_theta, (long long)c.rotary_dims,
              c.rope_pairing == RopePairing::kInterleaved ? "interleaved" : "half-split",
              RopeScalingName(c.rope_scaling.type).c_str(), c.rope_scaling.factor);
  std::printf("context:      %lld max positions\n", (long long)c.max_position_embeddings);
  if (c.num_nextn_layers > 0) {
    std::printf("mtp:          %lld NextN layer(s) after the trunk, from index %lld\n",
                (long long)c.num_nextn_layers, (long long)c.num_layers);
  }
  const ParameterCounts p = CountParameters(c);
  std::printf("parameters:   %s total, %s active per token (%s in routed experts)\n",
              Count(double(p.total)).c_str(), Count(double(p.active)).c_str(),
              Count(double(p.routed_experts)).c_str());
}

void PrintMemory(const ModelConfig& c, int64_t ctx, uint64_t weight_bytes) {
  const KvFootprint kv = KvValuesPerToken(c);
  const double kv_bytes = double(kv.values_per_token) * sizeof(float);
  std::printf("kv cache:     %lld values/token = %.0f bytes/token (f32)",
              (long long)kv.values_per_token, kv_bytes);
  if (kv.full_kv_values_per_token != kv.values_per_token) {
    std::printf("; full per-head K/V would be %lld values = %.0f bytes (%.1fx)",
                (long long)kv.full_kv_values_per_token,
                double(kv.full_kv_values_per_token) * sizeof(float),
                double(kv.full_kv_values_per_token) / double(kv.values_per_token));
  }
  std::printf("\n");
  const double state_bytes = double(kv.state_values_per_sequence) * sizeof(float);
  if (kv.state_values_per_sequence > 0) {
    std::printf("state:        %lld values/sequence = %s per sequence (KDA conv rows + f32 "
                "recurrent state, fixed whatever the length)\n",
                (long long)kv.state_values_per_sequence, Gib(state_bytes).c_str());
  }
  std::printf("memory:       weights %s + KV cache %s for %lld tokens%s%s\n",
              Gib(double(weight_bytes)).c_str(), Gib(kv_bytes * double(ctx)).c_str(),
              (long long)ctx, state_bytes > 0 ? " + state " : "",
              state_bytes > 0 ? Gib(state_bytes).c_str() : "");
}

// What `run`/`serve` on the cpu backend would take (one sequence at -c, f16 KV
// cache, 128-token steps), and whether --expert-cache (auto by default) streams.
int PrintPlan(const ModelFile& file, const ModelConfig& config, const InfoFlags& f) {
  auto cpu = CreateBackend("cpu", BackendOptions{});  // what run's default threads reserve
  if (!cpu.ok()) return ReportError(cpu.status());
  LoadOptions load;
  load.plan_backend = cpu->get();
  load.context = f.context;
  load.kv_type = DType::kF16;
  load.mla_form = f.mla_form;
  const SystemMemory memory = QuerySystemMemory();
  if (f.subset) {
    // The saving, with every weight resident: what the pruned experts took.
    LoadOptions full = load;
    full.planning = true;
    auto before = PlanMemory(file, full);
    full.expert_subset = &*f.subset;
    auto after = PlanMemory(file, full);
    if (!before.ok()) return ReportError(before.status());
    if (!after.ok()) return ReportError(after.status());
    const auto mib = [](uint64_t bytes) { return double(bytes) / double(1 << 20); };
    std::printf("pruning:      %s: weights %.1f MiB -> %.1f MiB (%.1f MiB, %.1f %%, not loaded)\n",
                DescribePruning(*f.subset, f.prune).c_str(), mib(before->weights),
                mib(after->weights), mib(before->weights - after->weights),
                100.0 * double(before->weights - after->weights) / double(before->weights));
    load.expert_subset = &*f.subset;
  }
  auto plan = PlanExpertStreaming(file, load, f.experts, StreamingTarget{}, memory);
  if (!plan.ok()) return ReportError(plan.status());
  const MemoryPlan& m = plan->stream ? plan->streamed : plan->resident;
  std::printf("cpu plan:     %s", DescribeMemoryPlan(m).c_str());
  // Beside the model's plan, the sampling state over the vocabulary: serve
  // prints the same term for its --parallel sequences.
  const int64_t vocab = config.vocab_size;
  const auto mib = [](uint64_t bytes) { return double(bytes) / double(1 << 20); };
  std::printf(
      "\n              + sampling %.1f MiB for one sequence (serve --parallel N: "
      "+ (N - 1) x %.1f MiB)",
      mib(Scheduler::SamplingBytes(vocab, 1)),
      mib(Scheduler::SamplingBytes(vocab, 2) - Scheduler::SamplingBytes(vocab, 1)));
  std::printf("\n              %s; %s available to this process\n",
              plan->stream ? "experts stream (--expert-cache)" : "every weight resident",
              Gib(double(memory.available)).c_str());
  return 0;
}

// What `run` on a device backend would reserve: every weight on the device,
// or, when --mem-budget is below that, the resident part and a device expert
// cache in the rest (runtime/expert_streaming.h).
int PrintDevicePlan(const ModelFile& file, const InfoFlags& f) {
  auto backend = CreateBackend(f.backend, BackendOptions{.device = f.device, .mem_budget = f.mem_budget});
  if (!backend.ok()) return ReportError(backend.status());
  const Backend& be = **backend;
  LoadOptions load;
  load.context = f.context;
  load.max_step_tokens = EngineOptions().max_step_tokens;
  load.kv_type = DType::kF32;
  load.mla_form = f.mla_form;
  load.cpu_moe_layers = f.experts.cpu_moe_layers;
  if (f.subset) load.expert_subset = &*f.subset;
  auto plan = PlanExpertStreaming(file, load, f.experts, StreamingTarget{&be, f.mem_budget},
                                  QuerySystemMemory());
  if (!plan.ok()) return ReportError(plan.status());
  const MemoryPlan& m = plan->stream ? plan->streamed : plan->resident;
  const uint64_t device = be.DeviceBytesFor(m);
  std::printf("%s plan:  %s of device memory = resident weights %s + KV cache %s + activations "
              "%s + staging and alignment %s",
              be.name().c_str(), Gib(double(device)).c_str(), Gib(double(m.weights)).c_str(),
              Gib(double(m.kv_cache)).c_str(), Gib(double(m.activations)).c_str(),
              Gib(double(device - m.total())).c_str());
  if (plan->stream) {
    std::printf(" + expert cache %s (%lld slots of one expert's gate, up and down; routed experts "
                "%s stay in the file)",
                Gib(double(m.expert_cache)).c_str(), (long long)m.expert_cache_slots,
                Gib(double(m.streamed_weights)).c_str());
  }
  if (m.cpu_weights > 0) std::printf(" (+ %s of experts in RAM, --cpu-moe)", Gib(double(m.cpu_weights)).c_str());
  std::printf("\n              %s; --mem-budget %s\n",
              plan->stream ? "hot experts cached on the device" : "every weight on the device",
              f.mem_budget > 0 ? Gib(double(f.mem_budget)).c_str() : "not set");
  return 0;
}

int InfoFromConfig(const InfoFlags& f) {
  auto hf = HfConfig::Load(f.model_path);
  if (!hf.ok()) return ReportError(hf.status());
  auto config = ModelConfigFromHf(**hf);
  if (!config.ok()) return ReportError(config.status());
  std::printf("model:        %s (config only, no weights)\n", f.model_path.c_str());
  PrintArchitecture(*config);
  const ParameterCounts p = CountParameters(*config);
  PrintMemory(*config, std::min(f.context, config->max_position_embeddings),
              uint64_t(p.total) * 2 /* bf16 */);
  std::printf("              (weights sized as bf16)\n");
  return 0;
}

// Whether `file` holds the first NextN layer's own tensors (eh_proj), and
// whether it holds trunk layers at all.
struct MtpPresence {
  bool nextn = false, trunk = false;
};
MtpPresence FindMtp(const ModelFile& file, const ModelConfig& c) {
  const std::string hf_name = LayerTensorName(c.num_layers, "eh_proj.weight");
  if (file.format == ModelFormat::kGguf) {
    auto arch_value = file.gguf->GetString("general.architecture");
    const std::string arch = arch_value.ok() ? *arch_value : "";
    return {file.tensors().Find(GgufTensorName(arch, hf_name)) != nullptr,
            file.tensors().Find("blk.0.attn_norm.weight") != nullptr};
  }
  return {file.tensors().Find(hf_name) != nullptr, true};
}

// Where the MTP layer is: in this file, in --mtp-file, or missing.
int PrintMtp(const InfoFlags& f, const ModelFile& file, const ModelConfig& c) {
  const MtpPresence here = FindMtp(file, c);
  if (!f.mtp_path.empty()) {
    auto mtp_file = OpenModelFile(f.mtp_path);
    if (!mtp_file.ok()) return ReportError(mtp_file.status());
    auto mtp_config = LoadModelConfig(*mtp_file);
    if (!mtp_config.ok()) return ReportError(mtp_config.status());
    const Status match = CheckMtpFileMatches(c, *mtp_config, f.mtp_path);
    if (!match.ok()) return ReportError(match);
    if (!FindMtp(*mtp_file, *mtp_config).nextn) {
      return ReportError(Status::Error(f.mtp_path + ": has no NextN layer tensors"));
    }
    std::printf("mtp file:     %s: NextN layer %lld (matches this trunk)\n", f.mtp_path.c_str(),
                (long long)c.num_layers);
    return 0;
  }
  if (c.num_nextn_layers == 0) return 0;
  if (!here.trunk) {
    std::printf("mtp tensors:  this is an MTP-only file: run the trunk with -m and this file "
                "with --mtp-file\n");
  } else if (here.nextn) {
    std::printf("mtp tensors:  in this file (load with --mtp)\n");
  } else {
    std::printf("mtp tensors:  declared but not in this file (a trunk-only file: pass the "
                "MTP-only GGUF with --mtp-file)\n");
  }
  return 0;
}

int Info(InfoFlags& f) {
  if (f.model_path.ends_with(".json")) return InfoFromConfig(f);
  auto file = OpenModelFile(f.model_path);
  if (!file.ok()) return ReportError(file.status());
  if (!f.prune.spec.empty()) {
    auto subset = PlanExpertPruning(*file, f.prune);
    if (!subset.ok()) return ReportError(subset.status());
    f.subset = std::move(*subset);
  }
  auto config = LoadModelConfig(*file);
  if (!config.ok()) return ReportError(config.status());
  std::printf("model:        %s (%s)\n", f.model_path.c_str(),
              file->format == ModelFormat::kGguf ? "gguf" : "hf safetensors");
  PrintArchitecture(*config);
  std::printf("tensors:      %s elements in the file\n",
              Count(double(CountTensorElements(file->tensors()))).c_str());
  uint64_t weight_bytes = 0;
  for (const auto& [dtype, u] : SummarizeDTypes(file->tensors())) {
    std::printf("  %-6s %5lld tensors %14lld elements %12s\n", dtype.c_str(), (long long)u.tensors,
                (long long)u.elements, Gib(double(u.bytes)).c_str());
    weight_bytes += u.bytes;
  }
  PrintMemory(*config, std::min(f.context, config->max_position_embeddings), weight_bytes);
  if (const int rc = PrintPlan(*file, *config, f); rc != 0) return rc;
  if (f.backend != "cpu") {
    if (const int rc = PrintDevicePlan(*file, f); rc != 0) return rc;
  }
  return PrintMtp(f, *file, *config);
}

}  // namespace

CommandFn RegisterInfo(CLI::App& cmd) {
  auto f = std::make_shared<InfoFlags>();
  cmd.add_option("-m,--model", f->model_path, "GGUF file, HF model folder, or config.json")
      ->required();
  cmd.add_option("-c,--ctx", f->context, "context length to size the KV cache for");
  cmd.add_option("--mtp-file", f->mtp_path,
                 "an MTP-only GGUF to check against this (trunk-only) model");
  AddExpertOptions(cmd, f->experts);
  AddMlaFormOption(cmd, f->mla_form);
  AddPruneOptions(cmd, f->prune);
  cmd.add_option("--backend", f->backend, "also print the plan on this device backend")
      ->check(CLI::IsMember(AvailableBackends()));
  cmd.add_option("--device", f->device, "device index of a device backend")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--mem-budget", f->mem_budget,
                 "device memory to plan for, in bytes (below what every weight needs: a device "
                 "expert cache in what the rest leaves)");
  return [f] { return Info(*f); };
}

}  // namespace anymoe::cli
