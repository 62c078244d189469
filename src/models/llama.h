// Dense llama-style decoder (Llama 2/3, SmolLM2, ...): RMSNorm, GQA attention
// with RoPE, SwiGLU MLP, tied or untied output head.
#pragma once

#include <memory>
#include <vector>

#include "models/model.h"
#include "models/rope.h"

namespace anymoe {

class LlamaModel final : public Model {
 public:
  static Expected<std::unique_ptr<Model>> Load(const ModelFile& file, ModelConfig config,
                                               Backend& backend, const LoadOptions& options);

  const ModelConfig& config() const override { return config_; }
  Backend& backend() override { return backend_; }
  Expected<std::unique_ptr<KvCache>> NewCache(int64_t capacity) override;
  Expected<Tensor> Forward(std::span<const int32_t> tokens, KvCache& cache,
                           bool all_logits) override;

 private:
  struct Layer {
    Tensor attn_norm, wq, wk, wv, wo;
    std::optional<Tensor> bq, bk, bv;
    Tensor ffn_norm, w_gate, w_up, w_down;
  };
  // Activations of one step, [max_step_tokens, ...] each, carved from one buffer.
  struct Activations {
    Tensor x, xn, q, k, v, attn, gate, up, logits;
  };

  LlamaModel(ModelConfig config, Backend& backend) : config_(std::move(config)), backend_(backend) {}
  Status BindWeights(const ModelFile& file);
  Status AllocateActivations();
  void AttentionBlock(const Layer& layer, int64_t l, int64_t t, KvCache& cache);
  void FeedForwardBlock(const Layer& layer, int64_t t);

  ModelConfig config_;
  Backend& backend_;
  Tensor tok_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  RopeFrequencies rope_freq_;
  RopeTable rope_;
  std::unique_ptr<Buffer> act_buffer_;
  Activations act_;
  std::vector<int32_t> positions_;
};

}  // namespace anymoe
