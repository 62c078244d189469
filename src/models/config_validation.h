// Checks a ModelConfig read from an untrusted file before anything is sized
// from it, and names the RoPE scaling types both file formats share. Each
// loader range-checks every field as it reads it, naming the file's own key
// (`num_hidden_layers`, `llama.block_count`), before any per-layer table is
// sized; ValidateConfig then checks the fields against each other.
#pragma once

#include <cstdint>
#include <string>

#include "models/model_config.h"

namespace anymoe {

// Upper bounds for sizes read from model files. Real models sit far inside
// them (the largest today: 126 layers, hidden 16384, 256 experts, vocab
// 262k, head dim 256), and they keep anything sized from a config small
// before the tensors themselves are checked against it.
struct ConfigBounds {
  static constexpr int64_t kLayers = 1024;
  static constexpr int64_t kVocab = int64_t(1) << 24;  // token ids are < 2^24 everywhere
  static constexpr int64_t kHidden = int64_t(1) << 16;
  static constexpr int64_t kHeads = 1024;
  static constexpr int64_t kHeadDim = 4096;
  static constexpr int64_t kFfn = int64_t(1) << 20;
  static constexpr int64_t kPositions = int64_t(1) << 24;
  static constexpr int64_t kExperts = int64_t(1) << 16;
  static constexpr int64_t kRank = int64_t(1) << 16;  // MLA LoRA ranks
  static constexpr double kMaxFactor = 1e6;           // RoPE and routing scale factors
};

// Every size positive and within ConfigBounds, heads divisible, MoE/MLA/DSA
// settings consistent. `where` (the file) starts each error message.
Status ValidateConfig(const ModelConfig& config, const std::string& where);

// The RoPE scaling numbers: finite, factors and lengths positive (a negative
// factor would mirror the rotation). `where` names the file and the section.
Status ValidateRopeScaling(const RopeScaling& s, const std::string& where);

Expected<RopeScaling::Type> RopeTypeFromName(const std::string& name, const std::string& where);

}  // namespace anymoe
