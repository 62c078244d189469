// Writes the model an expert subset makes of a GGUF file as a GGUF file of its
// own (`anymoe prune -o`): per MoE layer the kept experts' slices of the
// stacked expert tensors, router rows and selection-bias entries, in the
// subset's order, every other tensor and key as it was, `ARCH.expert_count`
// the kept count. Loading it gives the model that pruning at load gives,
// bit for bit. NextN / MTP layers (not profiled) are left out.
#pragma once

#include <string>

#include "core/status.h"
#include "formats/gguf.h"
#include "models/expert_subset.h"
#include "models/model_config.h"

namespace anymoe {

// `config` is `in`'s (unpruned); `subset` checked against it.
Status WritePrunedGguf(const GgufFile& in, const ModelConfig& config, const ExpertSubset& subset,
                       const std::string& out_path);

}  // namespace anymoe
