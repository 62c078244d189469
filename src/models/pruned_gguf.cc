#include "models/pruned_gguf.h"

#include <cstdlib>

#include "formats/gguf_writer.h"

namespace anymoe {
namespace {

// The per-expert tensors of a GGUF MoE layer (llama.cpp's names), [E, ...].
constexpr std::string_view kPerExpert[] = {
    "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
    "ffn_gate_up_exps.weight", "ffn_gate_inp.weight", "exp_probs_b.bias"};

// The layer of "blk.N.rest", with `rest`; -1 for a tensor of no layer.
int64_t LayerOf(std::string_view name, std::string_view* rest) {
  if (!name.starts_with("blk.")) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos || dot == 4) return -1;
  int64_t layer = 0;
  for (char ch : name.substr(4, dot - 4)) {
    if (ch < '0' || ch > '9' || layer > (int64_t(1) << 40)) return -1;
    layer = layer * 10 + (ch - '0');
  }
  *rest = name.substr(dot + 1);
  return layer;
}

}  // namespace

Status WritePrunedGguf(const GgufFile& in, const ModelConfig& config, const ExpertSubset& subset,
                       const std::string& out_path) {
  RETURN_IF_ERROR(subset.Check(config).WithContext(in.path()));
  ASSIGN_OR_RETURN(const std::string arch, in.GetString("general.architecture"));
  GgufWriter w(in.alignment());
  for (const GgufKeyValue& kv : in.metadata()) w.CopyValue(kv.key, kv.value);
  w.SetU32(arch + ".expert_count", uint32_t(subset.kept_per_layer()));
  if (config.num_nextn_layers > 0) {
    w.SetU32(arch + ".block_count", uint32_t(config.num_layers));
    w.SetU32(arch + ".nextn_predict_layers", 0);
  }
  for (const TensorInfo& t : in.tensors()) {
    std::string_view rest;
    const int64_t layer = LayerOf(t.name, &rest);
    if (layer >= config.num_layers) continue;  // NextN / MTP layers
    const bool moe = layer >= 0 && config.ffn_kinds[size_t(layer)] == FfnKind::kMoe;
    bool per_expert = false;
    for (std::string_view n : kPerExpert) per_expert = per_expert || (moe && rest == n);
    if (!per_expert) {
      w.AddTensor(t.name, t.dtype, t.shape, {std::span<const uint8_t>(t.data, t.bytes)});
      continue;
    }
    if (t.shape.empty() || t.shape[0] != subset.file_experts || t.scales) {
      return Status::Error(in.path() + ": tensor '" + t.name + "' has shape " +
                               ShapeString(t.shape) + ", expected " +
                               std::to_string(subset.file_experts) + " experts first",
                           ErrorKind::kInvalidArgument, "prune_invalid");
    }
    const uint64_t per = t.bytes / uint64_t(subset.file_experts);  // one expert's bytes
    std::vector<std::span<const uint8_t>> pieces;
    for (const int32_t e : subset.layer(layer)) {
      pieces.emplace_back(t.data + uint64_t(e) * per, per);
    }
    std::vector<int64_t> shape = t.shape;
    shape[0] = subset.kept_per_layer();
    w.AddTensor(t.name, t.dtype, std::move(shape), std::move(pieces));
  }
  return w.Write(out_path);
}

}  // namespace anymoe
