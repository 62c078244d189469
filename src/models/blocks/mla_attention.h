// Multi-head latent attention (DeepSeek-V3 / GLM) in its absorbed form: the
// cache holds one latent row per token (normalised compressed kv | rotated rope
// key), queries are projected into the latent space per head, attention runs
// MQA-style over the latent, and the value projection is applied after. With a
// DSA indexer each query attends only to its selected keys.
#pragma once

#include <memory>
#include <optional>

#include "models/blocks/attention.h"
#include "models/blocks/dsa_indexer.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class MlaAttention final : public AttentionBlock {
 public:
  static Expected<std::unique_ptr<AttentionBlock>> Bind(WeightBinder& w, Backend& backend,
                                                        const ModelConfig& c, int64_t layer,
                                                        const RopeTable& rope);
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override {
    AddNormed(ctx.backend, x, norm, y,
              [&](const Tensor& xn, const Tensor& out) { Forward(ctx, xn, out); });
  }
  LayerCacheSpec cache_spec() const override;
  uint64_t workspace_floats(int64_t t) const override;

 private:
  // x: the normed hidden state [T, H]; writes the block output [T, H] to `out`.
  void Forward(StepContext& ctx, const Tensor& x, const Tensor& out);
  MlaAttention(const ModelConfig& c, const RopeTable& rope) : c_(c), rope_(rope) {}
  Status AbsorbKvB(Backend& backend, const Tensor& kv_b);
  Status StoreAbsorbed(Backend& backend, const Tensor& k_b, const Tensor& v_b);
  Status WriteAbsorbed(Backend& backend, std::span<const float> wk, std::span<const float> wv);
  // The query [T, n_h, d_nope + d_rope], with its rope part rotated.
  Tensor Query(StepContext& ctx, const Tensor& x, Tensor* q_latent);
  void WriteLatent(StepContext& ctx, const Tensor& x);

  const ModelConfig& c_;
  RopeTable rope_;  // rope part last in each head
  std::optional<Tensor> wq_, wq_a_, q_a_norm_, wq_b_;
  Tensor wkv_a_, kv_a_norm_, wo_;
  std::unique_ptr<Buffer> absorbed_;
  Tensor w_k_absorb_;  // [n_h, kv_lora, d_nope]: q_nope -> latent space
  Tensor w_v_absorb_;  // [n_h, d_v, kv_lora]: latent -> value
  std::unique_ptr<DsaIndexer> indexer_;  // "full" DSA layers only
  bool uses_dsa_ = false;
};

}  // namespace anymoe
