// The attention half of a decoder layer (its token mixer). Implementations:
// GqaAttention (Llama, Qwen3, Mixtral, GLM-4.5), MlaAttention (DeepSeek-V3,
// GLM-4.7-Flash, GLM-5 with DSA, GLM-5.3's NoPE MLA with KPool DSA) and
// KdaAttention (GLM-5.3's linear attention).
#pragma once

#include "models/blocks/step_context.h"
#include "models/kv_cache.h"

namespace anymoe {

class AttentionBlock {
 public:
  virtual ~AttentionBlock() = default;
  // x += Attn(rmsnorm(x) * norm.weight) for the residual stream x [T, H], and
  // this step's keys and values into the cache. norm.out and y are [T, H]
  // scratch (blocks that fuse the norm or the add need not use them).
  virtual void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) = 0;
  // The block's output for rows already normed, xn [T, H], into out [T, H],
  // with no residual add: what a hyper-connected (mHC) layer mixes back itself.
  virtual void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) = 0;
  virtual LayerCacheSpec cache_spec() const = 0;
  // Workspace floats one step of `t` tokens needs.
  virtual uint64_t workspace_floats(int64_t t) const = 0;
  // The shape of the Attention calls it makes over cached keys, whose
  // backend scratch grows with the context (q_heads 0: it makes none).
  virtual AttentionShape attention_shape() const { return {}; }
  // Likewise for LatentAttention calls (heads 0: it makes none).
  virtual LatentShape latent_shape() const { return {}; }
};

class FeedForwardBlock {
 public:
  virtual ~FeedForwardBlock() = default;
  // x += FFN(rmsnorm(x) * norm.weight) for the residual stream x [T, H];
  // norm.out and y are [T, H] scratch.
  virtual void AddTo(StepContext& ctx, const Tensor& x, const RowNorm& norm, const Tensor& y) = 0;
  // As AttentionBlock::Compute: the output for normed rows, no residual add.
  virtual void Compute(StepContext& ctx, const Tensor& xn, const Tensor& out) = 0;
  virtual uint64_t workspace_floats(int64_t t) const = 0;
};

// AddTo for a block that computes from the normed rows: norm into norm.out,
// `forward(normed, y)`, then x += y.
template <class Forward>
void AddNormed(Backend& be, const Tensor& x, const RowNorm& norm, const Tensor& y,
               const Forward& forward) {
  be.RmsNorm(x, *norm.weight, norm.eps, norm.out);
  forward(norm.out, y);
  be.Add(x, y, x);
}

}  // namespace anymoe
