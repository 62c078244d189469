// DeepSeek sparse attention's lightning indexer (GLM-5): scores every cached
// key for each query with a few small ReLU heads and keeps the top-k, which the
// layer's MLA then attends to. Keys are cached per layer (post-LayerNorm,
// post-RoPE). Matches transformers: no Hadamard rotation, f32 scores.
#pragma once

#include <memory>

#include "models/blocks/step_context.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class DsaIndexer {
 public:
  static Expected<std::unique_ptr<DsaIndexer>> Bind(WeightBinder& w, const ModelConfig& c,
                                                    int64_t layer, const RopeTable& rope);
  // x: normed hidden [T, H]; q_latent: the normed query latent [T, q_lora_rank].
  // Writes this step's indexer keys to each sequence's cache and the selection
  // (positions within each sequence) to ctx.dsa.
  void Select(StepContext& ctx, const Tensor& x, const Tensor& q_latent);
  uint64_t workspace_floats(int64_t t) const;

 private:
  DsaIndexer(const ModelConfig& c, const RopeTable& rope) : c_(c), rope_(rope) {}
  const ModelConfig& c_;
  RopeTable rope_;  // the model's frequencies, the indexer's pairing, rope part first
  Tensor wq_b_, wk_, k_norm_w_, k_norm_b_, weights_proj_;
};

}  // namespace anymoe
