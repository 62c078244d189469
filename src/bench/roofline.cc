#include "bench/roofline.h"

#include <string>

namespace anymoe {

WeightRole ClassifyWeight(std::string_view name) {
  if (name == "token_embd.weight" || name.ends_with("embed_tokens.weight")) {
    return WeightRole::kEmbedding;
  }
  // GGUF: ffn_{gate,up,down,gate_up}_exps; HF: mlp.experts.{e}.* or the fused
  // mlp.experts.{gate_up,down}_proj. Shared experts are "shexp" / "shared_expert(s)".
  if (name.find("_exps.") != std::string_view::npos ||
      name.find(".experts.") != std::string_view::npos) {
    return WeightRole::kRoutedExpert;
  }
  return WeightRole::kOther;
}

double DecodeBytes::per_token() const {
  const double table = tied_embeddings ? double(embedding) : double(embedding_row);
  return double(other) + table + double(routed_experts) * routed_fraction();
}

Expected<DecodeBytes> DecodeBytesPerToken(const TensorSource& tensors, const ModelConfig& config) {
  DecodeBytes d;
  d.experts_per_token = config.moe.experts_per_token;
  d.num_experts = config.moe.num_experts;
  // A tied checkpoint that still stores its head is read through that copy.
  d.tied_embeddings = config.tie_word_embeddings && tensors.Find("output.weight") == nullptr &&
                      tensors.Find("lm_head.weight") == nullptr;
  int64_t embedding_rows = 0;
  for (const TensorInfo& t : tensors.tensors()) {
    switch (ClassifyWeight(t.name)) {
      case WeightRole::kEmbedding:
        d.embedding += t.bytes;
        embedding_rows += t.shape.empty() ? 1 : t.shape.front();
        break;
      case WeightRole::kRoutedExpert:
        d.routed_experts += t.bytes;
        break;
      case WeightRole::kOther:
        d.other += t.bytes;
        break;
    }
  }
  if (embedding_rows == 0) {
    return Status::Error(tensors.description() +
                         ": no embedding table (token_embd.weight or "
                         "embed_tokens.weight) to size the decode roofline");
  }
  if (d.routed_experts > 0 && !config.is_moe()) {
    return Status::Error(tensors.description() +
                         ": has routed-expert tensors but the config has no experts");
  }
  d.embedding_row = d.embedding / uint64_t(embedding_rows);
  return d;
}

}  // namespace anymoe
