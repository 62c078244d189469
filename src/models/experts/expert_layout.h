// Where the routed experts of a MoE layer lie in the model file(s), for
// streaming them from disk instead of keeping them resident: each expert is
// three matrices (gate, up, down), each one contiguous run of bytes in a file.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace anymoe {

// `bytes` bytes at `offset` of file `file` (an index into ModelFile::mapped_files()).
struct FileSpan {
  int32_t file = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// One of an expert's matrices as the file stores it (the same for every expert
// of a layer): gate and up [ffn, hidden], down [hidden, ffn].
struct ExpertMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  uint64_t bytes = 0;
  uint64_t scale_bytes = 0;  // FP8: its f32 block-scale grid (0: none)
};

inline constexpr int kExpertParts = 3;  // gate, up, down
using ExpertSpans = std::array<FileSpan, kExpertParts>;

// The streamed experts of one MoE layer.
struct LayerExperts {
  std::array<ExpertMatrix, kExpertParts> parts;
  std::vector<ExpertSpans> spans;  // [num_experts]
  // FP8 experts: each part's block scales from the expert's first row, for
  // the views of its slot ([num_experts]; empty when the experts have none).
  std::vector<std::array<BlockScales, kExpertParts>> scales;

  uint64_t expert_bytes() const { return parts[0].bytes + parts[1].bytes + parts[2].bytes; }
  int64_t num_experts() const { return int64_t(spans.size()); }
};

// Live expert replacement (POST /admin/experts, docs/server.md): what a routed
// expert's three matrices must be for `Model::ReplaceExpert` to take new
// weights for it (gate, up, down as the model's own experts hold them).
struct ReplaceableExperts {
  int64_t num_experts = 0;
  std::array<ExpertMatrix, kExpertParts> parts;  // dtype, rows, cols, bytes
};

}  // namespace anymoe
