// The KPool DSA indexer of GLM-5.3-Flash's indexed-attention layers
// (shared/new-archs.md §1.6): like GLM-5's lightning indexer but without RoPE,
// and scoring pools of index_kpool tokens, whose keys are a learned softmax
// pooling of the tokens' keys, instead of single keys; each query keeps the
// best index_topk / index_kpool complete pools before it plus its own
// unfinished pool. The cache holds each token's (key | gate score) row; the
// pools are rebuilt from them at every step (as transformers does).
#pragma once

#include <memory>

#include "models/blocks/step_context.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class KPoolIndexer {
 public:
  static Expected<std::unique_ptr<KPoolIndexer>> Bind(WeightBinder& w, const ModelConfig& c,
                                                      int64_t layer);
  // x: normed hidden [T, H]; q_latent: the normed query latent [T, q_lora_rank].
  // Writes this step's rows to each sequence's cache and the selection
  // (positions within each sequence, ascending) to ctx.dsa.
  void Select(StepContext& ctx, const Tensor& x, const Tensor& q_latent);
  uint64_t workspace_floats(int64_t t) const;
  // Values per token in the cache: key and gate score.
  int64_t cache_dim() const { return 2 * c_.dsa.head_dim; }
  // The widest selection of a query.
  int64_t stride() const;

 private:
  explicit KPoolIndexer(const ModelConfig& c) : c_(c) {}
  const ModelConfig& c_;
  Tensor wq_b_, wk_, k_norm_w_, k_norm_b_, weights_proj_, ape_, gate_;
};

}  // namespace anymoe
