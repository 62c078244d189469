// mHC hyper-connections (GLM-5.3-Flash, DeepSeek-V4) on the host, in f32 as
// transformers computes them (shared/new-archs.md §1.3-1.4): from each token's
// projection of its normed streams, the collapse weights `pre`, the expand
// weights `post` and the Sinkhorn-normalised (doubly stochastic) mixing
// matrix `comb`; the streams collapsed into the sublayer's input; and after the
// sublayer, the streams rebuilt as post * output + comb^T * streams.
#pragma once

#include <cstdint>

namespace anymoe::cpu {

struct HyperConnectionParams {
  int64_t streams = 0;  // hc_mult N
  int64_t hidden = 0;   // H
  int64_t sinkhorn_iters = 20;
  float eps = 1e-6f;
  const float* base = nullptr;   // [(2 + N) N]
  const float* scale = nullptr;  // [3]: pre, post, comb
};

// For `t` tokens: mix [t, (2 + N) N] (the normed streams times fn^T), x [t, N
// H] (the streams) -> collapsed [t, H] = sum_n pre[n] x[n], post [t, N], comb
// [t, N, N] (comb[m, n]: weight of input stream m in output stream n).
void HyperConnectionWeights(const HyperConnectionParams& p, int64_t t, const float* mix,
                            const float* x, float* collapsed, float* post, float* comb);

// x[n] <- post[n] * y + sum_m comb[m, n] x[m] for each of `t` tokens; y [t, H].
void HyperConnectionExpand(const HyperConnectionParams& p, int64_t t, const float* y,
                           const float* post, const float* comb, float* x);

}  // namespace anymoe::cpu
