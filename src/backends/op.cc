#include "backends/op.h"

#include <array>

namespace anymoe {
namespace {

constexpr std::array<std::string_view, kNumOps> kNames = {
    "Embedding",   "RmsNorm",     "Matmul",         "Rope",      "Attention", "LatentAttention",
    "HeadMatmul",  "CopyColumns", "IndexerTopK",    "LayerNorm", "Route",     "GroupedMatmul",
    "ScatterRows", "GatherRows",  "ScatterAddRows", "Zero",      "SwiGlu",    "Add",
    "Copy",
};

}  // namespace

std::string_view OpName(Op op) { return kNames[size_t(op)]; }

std::optional<Op> OpFromName(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (kNames[size_t(i)] == name) return Op(i);
  }
  return std::nullopt;
}

}  // namespace anymoe
