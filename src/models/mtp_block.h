// The multi-token-prediction (NextN) layer of DeepSeek-V3 / GLM-4.5+ / GLM-5,
// stored after the trunk at layer index num_layers. A draft step (DeepSeek-V3's
// MTP module, llama.cpp's graph_mtp) is
//   z = eh_proj([enorm(embed(token_{t+1})) ; hnorm(h_t)])   // [T, H], eh_proj [H, 2H]
//   z = z + Attn(attn_norm(z));  z = z + FFN(ffn_norm(z))   // a full decoder layer
//   logits = head(shared_head_norm(z))
// where h_t is the trunk's last hidden state before its final norm. This binds
// the weights (from the model file, or an MTP-only GGUF beside a trunk-only
// one) into blocks a speculative decoder can run; the trunk never runs it.
#pragma once

#include <memory>

#include "models/blocks/attention.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class MtpBlock {
 public:
  // Binds NextN layer `index` (>= c.num_layers) from `w`. `trunk_embed` and
  // `trunk_head` stand in for the layer's own embedding / head when the file
  // omits them (GLM-5 does). Errors name the missing or misshapen tensor.
  static Expected<std::unique_ptr<MtpBlock>> Bind(WeightBinder& w, Backend& backend,
                                                  const ModelConfig& c, int64_t index,
                                                  const RopeTable& rope, int64_t max_step_tokens,
                                                  const Tensor& trunk_embed,
                                                  const Tensor& trunk_head);

  int64_t layer_index() const { return index_; }
  // The layer's config: the trunk's, with per-layer kinds extended to cover
  // layer_index() (MoE; a full DSA indexer on GLM-5). The blocks refer to it.
  const ModelConfig& config() const { return *config_; }

  const Tensor& embed() const { return embed_; }        // [V, H]: own, or the trunk's
  const Tensor& enorm() const { return enorm_; }        // [H]
  const Tensor& hnorm() const { return hnorm_; }        // [H]
  const Tensor& eh_proj() const { return eh_proj_; }    // [H, 2H]: enorm half, then hnorm half
  const Tensor& attn_norm() const { return attn_norm_; }
  const Tensor& ffn_norm() const { return ffn_norm_; }
  AttentionBlock& attention() const { return *attention_; }  // runs as layer layer_index()
  FeedForwardBlock& ffn() const { return *ffn_; }
  const Tensor& head_norm() const { return head_norm_; }  // shared_head.norm
  const Tensor& head() const { return head_; }            // [V, H]: own, or the trunk's
  bool own_embed() const { return own_embed_; }
  bool own_head() const { return own_head_; }
  // The KV cache rows this layer's attention needs per token.
  LayerCacheSpec cache_spec() const { return attention_->cache_spec(); }
  uint64_t workspace_floats(int64_t t) const;
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  MtpBlock() = default;

  int64_t index_ = 0;
  std::unique_ptr<ModelConfig> config_;
  Tensor embed_, enorm_, hnorm_, eh_proj_, attn_norm_, ffn_norm_, head_norm_, head_;
  bool own_embed_ = false, own_head_ = false;
  std::unique_ptr<AttentionBlock> attention_;
  std::unique_ptr<FeedForwardBlock> ffn_;
  uint64_t weight_bytes_ = 0;
};

// Checks that an MTP-only file (llama.cpp's `convert_hf_to_gguf.py --mtp`)
// belongs to the trunk described by `trunk`: same architecture and sizes, and
// NextN layers declared. `mtp` is the MTP file's own config.
Status CheckMtpFileMatches(const ModelConfig& trunk, const ModelConfig& mtp,
                           const std::string& mtp_path);

}  // namespace anymoe
