// Multi-head latent attention (DeepSeek-V3 / GLM). The cache holds one latent
// row per token (normalised compressed kv | rotated rope key). In the absorbed
// form (the default) queries are projected into the latent space per head,
// attention runs MQA-style over the latent, and the value projection is
// applied after; with a DSA indexer each query attends only to its selected
// keys. The expanded form (--mla-form, mla_form.h) rebuilds per-head keys and
// values from the latent rows for a dense segment and runs plain attention.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "models/blocks/attention.h"
#include "models/blocks/dsa_indexer.h"
#include "models/blocks/kpool_indexer.h"
#include "models/blocks/mla_form.h"
#include "models/model_config.h"
#include "models/weight_binder.h"

namespace anymoe {

class MlaAttention final : public AttentionBlock {
 public:
  // `form` other than kAbsorbed also keeps kv_b_proj in f32 for the expanded
  // form and sizes its scratch for segments of up to `key_order.size()` keys
  // (longer ones run absorbed), `budget_floats` per head group
  // (ExpandedMlaHeadGroup). key_order is 0, 1, 2, ... (the expanded rows in
  // order), owned by the model and shared by its layers.
  static Expected<std::unique_ptr<AttentionBlock>> Bind(
      WeightBinder& w, Backend& backend, const ModelConfig& c, int64_t layer, const RopeTable& rope,
      MlaForm form = MlaForm::kAbsorbed, std::span<const int32_t> key_order = {},
      int64_t budget_floats = kMlaExpandBudgetFloats);
  void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) override {
    AddNormed(ctx.backend, x, norm, y,
              [&](const Tensor& xn, const Tensor& out) { Forward(ctx, xn, out); });
  }
  void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) override {
    Forward(ctx, xn, out);
  }
  LayerCacheSpec cache_spec() const override;
  uint64_t workspace_floats(int64_t t) const override;
  // The expanded form's calls (group_ heads each); the absorbed form's
  // LatentAttention tiles do not grow with the context.
  AttentionShape attention_shape() const override;
  LatentShape latent_shape() const override;

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
  // Whether segment `s` runs in the expanded form.
  bool Expands(const StepContext& ctx, const Segment& s) const;
  // The expanded form's scratch: a segment's latent rows [S, kv_lora + rope]
  // and their kv_lora part, then per head group k_nope|v [S, g (d_nope + d_v)],
  // keys [S, g, qk], values [S, g, d_v], queries [T, g, qk] and outputs [T, g, d_v].
  struct ExpandScratch {
    Tensor latent, c, kv, k, v, q, o;
  };
  // The expanded form for segment `s`: its queries' rows of q [T, n_h, qk] in,
  // its rows of o [T, n_h, d_v] out.
  void ExpandedAttention(StepContext& ctx, const Tensor& q, const Segment& s,
                         const ExpandScratch& scratch, const Tensor& o);

  const ModelConfig& c_;
  RopeTable rope_;  // rope part last in each head
  std::optional<Tensor> wq_, wq_a_, q_a_norm_, wq_b_;
  Tensor wkv_a_, kv_a_norm_, wo_;
  std::unique_ptr<Buffer> absorbed_;
  Tensor w_k_absorb_;  // [n_h, kv_lora, d_nope]: q_nope -> latent space
  Tensor w_v_absorb_;  // [n_h, d_v, kv_lora]: latent -> value
  MlaForm form_ = MlaForm::kAbsorbed;
  int64_t max_keys_ = 0;  // the expanded form's scratch holds this many keys
  std::span<const int32_t> key_order_;  // 0, 1, ..., max_keys - 1 (the model's)
  int64_t group_ = 1;     // heads per expanded attention call
  // kv_b_proj in f32, [n_h * (d_nope + d_v), kv_lora] (per head its k_nope
  // rows, then its v rows): latent -> keys and values (expanded form only).
  Tensor w_expand_;
  std::unique_ptr<Buffer> expand_buffer_;
  std::unique_ptr<DsaIndexer> indexer_;  // "full" DSA layers only
  std::unique_ptr<KPoolIndexer> kpool_;  // "full" KPool DSA layers (GLM-5.3) instead
  bool uses_dsa_ = false;
};

}  // namespace anymoe
