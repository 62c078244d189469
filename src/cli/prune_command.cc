// `anymoe prune`: writes the model that --expert-prune PROFILE:KEEP loads as a
// GGUF file of its own (models/pruned_gguf.h), for a deployment that always
// runs the same pruning, or for other engines (llama.cpp cannot prune at load).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "models/config_loader.h"
#include "models/model_file.h"
#include "models/pruned_gguf.h"
#include "runtime/expert_pruning.h"

namespace anymoe::cli {
namespace {

struct PruneFlags {
  std::string model_path;
  ExpertPruneOptions prune;
  std::string out;
};

int Prune(const PruneFlags& f) {
  auto file = OpenModelFile(f.model_path);
  if (!file.ok()) return ReportError(file.status());
  if (file->format != ModelFormat::kGguf) {
    return ReportError(Status::Error(f.model_path + ": anymoe prune writes GGUF from a GGUF file; "
                                     "prune a safetensors model at load (--expert-prune)",
                                     ErrorKind::kInvalidArgument, "prune_unsupported"));
  }
  auto config = LoadModelConfig(*file);
  if (!config.ok()) return ReportError(config.status());
  auto subset = PlanExpertPruning(*file, f.prune);
  if (!subset.ok()) return ReportError(subset.status());
  if (std::filesystem::weakly_canonical(f.out) == std::filesystem::weakly_canonical(f.model_path)) {
    return ReportError(Status::Error("-o " + f.out + " is the input file",
                                     ErrorKind::kInvalidArgument, "prune_invalid"));
  }
  if (Status st = WritePrunedGguf(*file->gguf, *config, *subset, f.out); !st.ok()) {
    return ReportError(st);
  }
  std::error_code ec;
  const auto in_bytes = std::filesystem::file_size(f.model_path, ec);
  const auto out_bytes = std::filesystem::file_size(f.out, ec);
  std::printf("wrote %s: %s; file %.1f MiB -> %.1f MiB\n", f.out.c_str(),
              DescribePruning(*subset, f.prune).c_str(), double(in_bytes) / double(1 << 20),
              double(out_bytes) / double(1 << 20));
  return 0;
}

}  // namespace

CommandFn RegisterPrune(CLI::App& cmd) {
  auto f = std::make_shared<PruneFlags>();
  cmd.add_option("-m,--model", f->model_path, "GGUF file to prune")->required();
  AddPruneOptions(cmd, f->prune);
  cmd.get_option("--expert-prune")->required();
  cmd.add_option("-o,--output", f->out, "write the pruned model to OUT.gguf")->required();
  return [f] { return Prune(*f); };
}

}  // namespace anymoe::cli
