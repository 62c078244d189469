// Kimi delta attention (KDA, GLM-5.3-Flash's linear-attention layers) for one
// sequence on the host, in f32 as transformers' torch fallback computes it
// (shared/new-archs.md §1.5): depthwise causal conv + silu over the q|k|v
// projections, the bounded forget gate, l2-normalised q and k, the gated delta
// rule over a [heads, d, d] state, then the gated output RMSNorm. The delta
// rule has two forms, equal in exact arithmetic: the recurrent one (a token at
// a time, what decode runs) and the chunked one (64 tokens at a time through
// the WY form, what prefill runs); they differ by f32 rounding only.
#pragma once

#include <cstdint>

namespace anymoe::cpu {

struct KdaParams {
  int64_t heads = 0, head_dim = 0, conv_kernel = 0;
  bool bounded_gate = true;  // g = lower_bound * sigmoid(exp(A_log) a); else -exp(A_log) softplus(a)
  float lower_bound = -5.0f;
  float norm_eps = 1e-5f;    // the gated output RMSNorm
  const float* conv = nullptr;     // [3D, conv_kernel], D = heads * head_dim
  const float* dt_bias = nullptr;  // [D]
  const float* a_log = nullptr;    // [heads]
  const float* o_norm = nullptr;   // [head_dim]
};

// The recurrent state of one sequence in one layer: `conv_kernel - 1` pre-conv
// rows [3D] (oldest first, zeros at the start) then S [heads, d, d] (row: key
// channel, column: value channel).
inline int64_t KdaStateFloats(const KdaParams& p) {
  const int64_t d = p.heads * p.head_dim;
  return (p.conv_kernel - 1) * 3 * d + p.heads * p.head_dim * p.head_dim;
}

enum class KdaForm { kRecurrent, kChunked };

// One sequence's `t` new rows: u [t, 3D] (q | k | v projections before the
// conv), f [t, D] (forget-gate low-rank output, before dt_bias), beta [t,
// heads] (logits), gate [t, D] (output-gate low-rank output, before the
// sigmoid). Advances `state` over the rows and writes out [t, D] (normed and
// gated, before o_proj).
void KdaSequence(const KdaParams& p, KdaForm form, int64_t t, const float* u, const float* f,
                 const float* beta, const float* gate, float* state, float* out);

}  // namespace anymoe::cpu
