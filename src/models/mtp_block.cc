#include "models/mtp_block.h"

#include <algorithm>

#include "models/blocks/dense_mlp.h"
#include "models/blocks/gqa_attention.h"
#include "models/blocks/mla_attention.h"
#include "models/blocks/moe_block.h"

namespace anymoe {

Expected<std::unique_ptr<MtpBlock>> MtpBlock::Bind(WeightBinder& w, Backend& backend,
                                                   const ModelConfig& c, int64_t index,
                                                   const RopeTable& rope, int64_t max_step_tokens,
                                                   const Tensor& trunk_embed,
                                                   const Tensor& trunk_head) {
  std::unique_ptr<MtpBlock> m(new MtpBlock());
  m->index_ = index;
  m->config_ = std::make_unique<ModelConfig>(c);
  ModelConfig& mc = *m->config_;
  // The NextN layer is a MoE layer wherever the trunk has experts (all four
  // families), with its own full indexer on GLM-5.
  mc.ffn_kinds.resize(size_t(index + 1), c.is_moe() ? FfnKind::kMoe : FfnKind::kDense);
  if (c.dsa.topk > 0) mc.indexer_kinds.resize(size_t(index + 1), IndexerKind::kFull);
  const int64_t h = c.hidden_size, v = c.vocab_size;
  const uint64_t before = w.bound_bytes();

  ASSIGN_OR_RETURN(m->enorm_, w.Layer(index, "enorm.weight", {h}));
  ASSIGN_OR_RETURN(m->hnorm_, w.Layer(index, "hnorm.weight", {h}));
  ASSIGN_OR_RETURN(m->eh_proj_, w.Layer(index, "eh_proj.weight", {h, 2 * h}));
  ASSIGN_OR_RETURN(m->attn_norm_, w.Layer(index, "input_layernorm.weight", {h}));
  ASSIGN_OR_RETURN(m->ffn_norm_, w.Layer(index, "post_attention_layernorm.weight", {h}));
  if (mc.attention == AttentionKind::kMla) {
    ASSIGN_OR_RETURN(m->attention_, MlaAttention::Bind(w, backend, mc, index, rope));
  } else {
    ASSIGN_OR_RETURN(m->attention_, GqaAttention::Bind(w, mc, index, rope));
  }
  if (mc.ffn_kinds[size_t(index)] == FfnKind::kMoe) {
    ASSIGN_OR_RETURN(m->ffn_, MoeBlock::Bind(w, mc, index, max_step_tokens));
  } else {
    ASSIGN_OR_RETURN(m->ffn_, DenseMlp::Bind(w, index, "mlp", h, mc.intermediate_size));
  }
  // Optional: GLM-5's layer shares the trunk's embedding and head; a missing
  // shared_head.norm falls back to the trunk's final norm as llama.cpp does.
  ASSIGN_OR_RETURN(auto head_norm, w.OptionalLayer(index, "shared_head.norm.weight", {h}));
  if (head_norm) {
    m->head_norm_ = *head_norm;
  } else {
    ASSIGN_OR_RETURN(m->head_norm_, w.Require("model.norm.weight", {h}));
  }
  ASSIGN_OR_RETURN(auto embed, w.OptionalLayer(index, "embed_tokens.weight", {v, h}));
  ASSIGN_OR_RETURN(auto head, w.OptionalLayer(index, "shared_head.head.weight", {v, h}));
  m->own_embed_ = embed.has_value();
  m->own_head_ = head.has_value();
  m->embed_ = embed.value_or(trunk_embed);
  m->head_ = head.value_or(trunk_head);
  m->weight_bytes_ = w.bound_bytes() - before;
  return m;
}

uint64_t MtpBlock::workspace_floats(int64_t t) const {
  return std::max(attention_->workspace_floats(t), ffn_->workspace_floats(t));
}

Status CheckMtpFileMatches(const ModelConfig& trunk, const ModelConfig& mtp,
                           const std::string& mtp_path) {
  auto mismatch = [&](const std::string& what, int64_t a, int64_t b) {
    return Status::Error(mtp_path + ": MTP file does not match the trunk: " + what + " " +
                         std::to_string(b) + " vs " + std::to_string(a));
  };
  if (mtp.arch != trunk.arch) {
    return Status::Error(mtp_path + ": MTP file is " + mtp.arch + ", the trunk " + trunk.arch);
  }
  if (mtp.num_nextn_layers < 1) {
    return Status::Error(mtp_path + ": declares no NextN layers (nextn_predict_layers)");
  }
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"trunk layers", {trunk.num_layers, mtp.num_layers}},
      {"hidden size", {trunk.hidden_size, mtp.hidden_size}},
      {"vocabulary", {trunk.vocab_size, mtp.vocab_size}},
      {"heads", {trunk.num_heads, mtp.num_heads}},
      {"experts", {trunk.moe.num_experts, mtp.moe.num_experts}},
      {"expert ffn", {trunk.moe.expert_ffn, mtp.moe.expert_ffn}},
      {"kv_lora_rank", {trunk.mla.kv_lora_rank, mtp.mla.kv_lora_rank}},
  };
  for (const auto& [what, values] : fields) {
    if (values.first != values.second) return mismatch(what, values.first, values.second);
  }
  if (trunk.num_nextn_layers > 0 && trunk.num_nextn_layers != mtp.num_nextn_layers) {
    return mismatch("NextN layers", trunk.num_nextn_layers, mtp.num_nextn_layers);
  }
  return Status::Ok();
}

}  // namespace anymoe
