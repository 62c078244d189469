// New weights for routed experts, uploaded to a running server (POST
// /admin/experts, docs/server.md): a GGUF file holding the replaced experts of
// one layer, checked against the model (names, shapes, dtype, finite values)
// and copied out of the upload before anything changes, so that the scheduler
// only has to swap the prepared copy in between two steps.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "models/model.h"

namespace anymoe {

// The upload's experts, validated, with their bytes owned here.
struct StagedExperts {
  int64_t layer = 0;
  std::vector<int64_t> experts;                          // the model's expert ids, in upload order
  std::vector<std::array<TensorInfo, kExpertParts>> parts;  // per expert: gate, up, down
  std::shared_ptr<const void> storage;                   // what `parts` point into
};

// Largest number of experts one upload may replace (bounds the work and the
// error messages; a layer of a released model has at most 384).
inline constexpr size_t kMaxUploadExperts = 1024;

// Parses `gguf` (the upload's bytes) and checks it against the experts of
// `layer` that `shape` describes (Model::ReplaceableExpertsOf): the file must
// hold exactly blk.{layer}.ffn_{gate,up,down}_exps.weight, each stacked over
// `experts` in that order ([n, ffn, hidden] and [n, hidden, ffn]) in the
// model's dtype, every value finite. Errors carry a code: invalid_upload (not
// a readable GGUF, truncated), missing_tensor, unexpected_tensor,
// invalid_shape, invalid_dtype, non_finite, invalid_expert.
Expected<StagedExperts> StageExpertUpload(std::string_view gguf, int64_t layer,
                                          std::span<const int64_t> experts,
                                          const ReplaceableExperts& shape);

// Swaps the staged experts into `model` (its thread only).
Status ApplyStagedExperts(Model& model, const StagedExperts& staged);

}  // namespace anymoe
