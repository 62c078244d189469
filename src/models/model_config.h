// The architecture-neutral description of a model: sizes, norms, RoPE, the
// attention variant (GQA or MLA, optionally with DSA), and which layers are
// dense or MoE. Filled from GGUF metadata or an HF config.json, so the forward
// code never looks at file formats.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn, kDynamic };
  Type type = Type::kNone;
  double factor = 1.0;
  double original_max_position = 0;  // original_max_position_embeddings
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0: absent
  double mscale_all_dim = 0.0;  // 0: absent
  double attention_factor = 0.0;  // 0: derive
  bool truncate = true;
};

std::string RopeScalingName(RopeScaling::Type t);

enum class AttentionKind { kGqa, kMla };
enum class FfnKind { kDense, kMoe };
enum class IndexerKind { kNone, kFull, kShared };
// A layer's token mixer: attention over the cache (GQA or MLA), or GLM-5.3's
// KDA linear attention over a fixed per-sequence recurrent state.
enum class MixerKind { kAttention, kLinear };

// Multi-head latent attention (DeepSeek-V3, GLM-4.7-Flash, GLM-5).
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  float latent_norm_eps = 1e-6f;  // q_a/kv_a layernorms: HF's class default, not rms_norm_eps
};

// DeepSeek sparse attention's lightning indexer (GLM-5).
struct DsaConfig {
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t topk = 0;
  RopePairing pairing = RopePairing::kInterleaved;
  float norm_eps = 1e-6f;  // the indexer's LayerNorm
};

// KPool DSA (GLM-5.3-Flash): the indexer scores pools of `pool` consecutive
// tokens (their keys softmax-pooled) instead of single keys, keeps the best
// dsa.topk / pool pools and, with `select_tail`, the query's unfinished pool.
struct KPoolConfig {
  int64_t pool = 0;  // 0: per-token DSA (GLM-5, DeepSeek-V3.2)
  bool select_tail = true;
};

// Kimi delta attention (the `linear_attention` layers of GLM-5.3-Flash).
struct KdaConfig {
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t conv_kernel = 4;
  bool bounded_gate = true;   // linear_lower_bound set: g = lb * sigmoid(.), else -exp(A) softplus(.)
  float lower_bound = -5.0f;
  // Values of the per-sequence recurrent state of one layer: the last
  // conv_kernel - 1 pre-conv rows [3 * heads * head_dim] and the fp32 state
  // [heads, head_dim, head_dim].
  int64_t state_floats() const {
    const int64_t d = num_heads * head_dim;
    return (conv_kernel - 1) * 3 * d + num_heads * head_dim * head_dim;
  }
};

// mHC hyper-connections: `mult` residual streams mixed around each sublayer
// (1: the plain residual stream).
struct HyperConnectionConfig {
  int64_t mult = 1;
  int64_t sinkhorn_iters = 20;
  float eps = 1e-6f;
};

struct MoeConfig {
  enum class Scoring { kSoftmax, kSigmoid };
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t expert_ffn = 0;          // moe_intermediate_size
  int64_t shared_ffn = 0;          // width of the shared-expert MLP (0: none)
  int64_t n_group = 1;             // group-limited routing
  int64_t topk_group = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.0f;
  Scoring scoring = Scoring::kSoftmax;
  bool selection_bias = false;     // e_score_correction_bias (selection only)
};

// How an embedding request turns a prompt's final-normed hidden states into
// one vector: their mean, the first row's (CLS) or the last row's.
enum class EmbeddingPooling { kMean, kCls, kLast };

struct ModelConfig {
  std::string arch;  // "llama", "glm4_moe", "glm_moe_dsa", ...
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;             // GQA head dim (MLA: qk_nope + qk_rope)
  int64_t intermediate_size = 0;    // dense MLP width
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;

  double rope_theta = 10000.0;
  int64_t rotary_dims = 0;  // leading dims of a head that rotate (= head_dim unless partial)
  RopePairing rope_pairing = RopePairing::kHalfSplit;
  RopeScaling rope_scaling;

  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases
  bool qk_norm = false;         // per-head RMSNorm on q and k (Qwen3, GLM-4.5)

  AttentionKind attention = AttentionKind::kGqa;
  MlaConfig mla;
  DsaConfig dsa;
  MoeConfig moe;
  KPoolConfig kpool;
  KdaConfig kda;
  HyperConnectionConfig hc;
  // SwiGLU clamp (GLM-5.3): gate clamped from above, up to [-limit, limit],
  // before silu, in every feed-forward; 0: none.
  float swiglu_limit = 0;
  std::vector<MixerKind> mixer_kinds;      // per layer; empty: all attention
  std::vector<FfnKind> ffn_kinds;          // per layer
  std::vector<IndexerKind> indexer_kinds;  // per layer; empty unless DSA
  // Multi-token-prediction (NextN) layers stored after the trunk, at layer
  // indices [num_layers, num_layers + num_nextn_layers); the trunk never runs
  // them (models/mtp_block.h binds them on request).
  int64_t num_nextn_layers = 0;
  // GGUF `<arch>.pooling_type` (llama.cpp's 2 cls, 3 last); mean otherwise.
  EmbeddingPooling pooling = EmbeddingPooling::kMean;

  bool is_moe() const { return moe.num_experts > 0; }
  // Attention without positions (GLM-5.3's NoPE MLA): no RoPE anywhere.
  bool is_nope() const { return arch == "glm5_next"; }
  bool is_linear(int64_t layer) const {
    return !mixer_kinds.empty() && mixer_kinds[size_t(layer)] == MixerKind::kLinear;
  }
  int64_t num_moe_layers() const;
  float AttentionScale() const;  // softmax scale, with YaRN's mscale for MLA
  std::string Summary() const;   // one line for logs
};

}  // namespace anymoe
