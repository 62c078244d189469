// The attention half of a decoder layer. Implementations: GqaAttention
// (Llama, Qwen3, Mixtral, GLM-4.5) and MlaAttention (DeepSeek-V3, GLM-4.7-Flash,
// GLM-5 with DSA).
#pragma once

#include "models/blocks/step_context.h"
#include "models/kv_cache.h"

namespace anymoe {

class AttentionBlock {
 public:
  virtual ~AttentionBlock() = default;
  // x: the normed hidden state [T, H]; writes the block output [T, H] to `out`
  // and this step's keys to the cache.
  virtual void Forward(StepContext& ctx, const Tensor& x, const Tensor& out) = 0;
  virtual LayerCacheSpec cache_spec() const = 0;
  // Workspace floats one step of `t` tokens needs.
  virtual uint64_t workspace_floats(int64_t t) const = 0;
};

class FeedForwardBlock {
 public:
  virtual ~FeedForwardBlock() = default;
  // x: the normed hidden state [T, H]; writes the block output [T, H] to `out`.
  virtual void Forward(StepContext& ctx, const Tensor& x, const Tensor& out) = 0;
  virtual uint64_t workspace_floats(int64_t t) const = 0;
};

}  // namespace anymoe
