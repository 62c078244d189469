// Looks up a model's weights by their HF-style name in its file (GGUF names are
// mapped, see tensor_names.h) and makes them usable by the backend, checking
// each shape against what the config implies. Every architecture binds its
// weights through this one place.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "models/model_file.h"

namespace anymoe {

// The weights of every routed expert of one MoE layer, one view per expert,
// whatever the file layout (per-expert tensors, stacked [E, ...], fused gate_up).
struct ExpertWeights {
  std::vector<Tensor> gate, up, down;  // gate/up [I, H], down [H, I]
};

class WeightBinder {
 public:
  WeightBinder(const ModelFile& file, Backend& backend);

  bool is_gguf() const { return file_.format == ModelFormat::kGguf; }

  // The tensor `name` with exactly `shape` (outer-first); a clear error if it is
  // missing or shaped differently.
  Expected<Tensor> Require(const std::string& name, std::initializer_list<int64_t> shape);
  // Like Require, but absence is not an error.
  Expected<std::optional<Tensor>> Optional(const std::string& name,
                                           std::initializer_list<int64_t> shape);
  // Layer-relative forms: "self_attn.q_proj.weight" of layer `i`.
  Expected<Tensor> Layer(int64_t i, const std::string& suffix,
                         std::initializer_list<int64_t> shape);
  Expected<std::optional<Tensor>> OptionalLayer(int64_t i, const std::string& suffix,
                                                std::initializer_list<int64_t> shape);

  // Routed experts of layer `i` under `prefix` ("mlp.experts" or
  // "block_sparse_moe.experts"), with Mixtral's w1/w3/w2 names accepted too.
  Expected<ExpertWeights> Experts(int64_t i, const std::string& prefix, int64_t num_experts,
                                  int64_t ffn, int64_t hidden);

  uint64_t bound_bytes() const { return bound_bytes_; }

 private:
  std::string FileName(const std::string& hf_name) const;
  Expected<std::optional<Tensor>> Bind(const std::string& name, const std::vector<int64_t>& shape);
  Expected<bool> PerExpert(int64_t i, const std::string& prefix, int64_t num_experts, int64_t ffn,
                           int64_t hidden, ExpertWeights& out);
  Expected<bool> Stacked(int64_t i, const std::string& prefix, int64_t num_experts, int64_t ffn,
                         int64_t hidden, ExpertWeights& out);

  const ModelFile& file_;
  Backend& backend_;
  std::string gguf_arch_;
  uint64_t bound_bytes_ = 0;
};

}  // namespace anymoe
