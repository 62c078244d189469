// The ops of the Backend interface, as values: what a backend declares it
// supports (Backend::Supports), what FallbackBackend reports, and what
// `anymoe doctor` lists for a model. ReadF32/WriteF32 are transfers, not ops:
// every backend must implement them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace anymoe {

enum class Op : uint8_t {
  kEmbedding,
  kRmsNorm,
  kMatmul,
  kRope,
  kAttention,
  kLatentAttention,
  kHeadMatmul,
  kCopyColumns,
  kIndexerTopK,
  kLayerNorm,
  kRoute,
  kGroupedMatmul,
  kScatterRows,
  kGatherRows,
  kScatterAddRows,
  kZero,
  kSwiGlu,
  kAdd,
  kCopy,
};
inline constexpr int kNumOps = int(Op::kCopy) + 1;

// "Matmul", "Attention", ... (the method names of Backend).
std::string_view OpName(Op op);
// Inverse of OpName; nullopt for an unknown name.
std::optional<Op> OpFromName(std::string_view name);

}  // namespace anymoe
