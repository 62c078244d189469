#include "backends/cpu/kda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace anymoe::cpu {
namespace {

constexpr int64_t kChunk = 64;  // transformers' chunk_kimi_delta_attention

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// x / sqrt(sum x^2 + 1e-6): FLA's l2norm (the eps inside the root).
void L2Normalize(float* x, int64_t n, float scale) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Per-token inputs of the delta rule, head-major: q, k [t, heads, d] (normed,
// q scaled), v [t, heads, d], g [t, heads, d] (log decay), b [t, heads].
struct DeltaInputs {
  std::vector<float> q, k, v, g, b;
};

DeltaInputs Prepare(const KdaParams& p, int64_t t, const float* u, const float* f,
                    const float* beta, float* conv_rows) {
  const int64_t d = p.head_dim, D = p.heads * d, C = 3 * D, kc = p.conv_kernel;
  DeltaInputs in;
  in.q.resize(size_t(t * D));
  in.k.resize(size_t(t * D));
  in.v.resize(size_t(t * D));
  in.g.resize(size_t(t * D));
  in.b.resize(size_t(t * p.heads));
  // Depthwise causal conv over [old rows | new rows], silu, split into q | k | v.
  const int64_t hist = kc - 1;
  std::vector<float> window(size_t((hist + t) * C));
  std::memcpy(window.data(), conv_rows, size_t(hist * C) * sizeof(float));
  std::memcpy(window.data() + hist * C, u, size_t(t * C) * sizeof(float));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < C; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < kc; ++i) acc += p.conv[j * kc + i] * window[size_t((r + i) * C + j)];
      const float y = acc * Sigmoid(acc);
      float* dst = j < D ? in.q.data() : j < 2 * D ? in.k.data() : in.v.data();
      dst[r * D + j % D] = y;
    }
  }
  std::memcpy(conv_rows, window.data() + t * C, size_t(hist * C) * sizeof(float));
  const float q_scale = 1.0f / std::sqrt(float(d));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t h = 0; h < p.heads; ++h) {
      L2Normalize(in.q.data() + r * D + h * d, d, q_scale);
      L2Normalize(in.k.data() + r * D + h * d, d, 1.0f);
      const float decay = std::exp(p.a_log[h]);
      for (int64_t i = 0; i < d; ++i) {
        const int64_t c = h * d + i;
        const float a = f[r * D + c] + p.dt_bias[c];
        float g;
        if (p.bounded_gate) {
          g = p.lower_bound * Sigmoid(decay * a);
        } else {
          g = -decay * (a > 20.0f ? a : std::log(1.0f + std::exp(a)));
        }
        in.g[size_t(r * D + c)] = g;
      }
      in.b[size_t(r * p.heads + h)] = Sigmoid(beta[r * p.heads + h]);
    }
  }
  return in;
}

// S <- diag(e^g) S; delta = b (v - S^T k); S += k delta^T; o = S^T q.
void Recurrent(const KdaParams& p, int64_t t, const DeltaInputs& in, float* state, float* o) {
  const int64_t d = p.head_dim, D = p.heads * d;
  std::vector<float> delta(static_cast<size_t>(d));
  for (int64_t h = 0; h < p.heads; ++h) {
    float* S = state + h * d * d;
    for (int64_t r = 0; r < t; ++r) {
      const float* q = in.q.data() + r * D + h * d;
      const float* k = in.k.data() + r * D + h * d;
      const float* v = in.v.data() + r * D + h * d;
      const float* g = in.g.data() + r * D + h * d;
      const float b = in.b[size_t(r * p.heads + h)];
      for (int64_t i = 0; i < d; ++i) {
        const float e = std::exp(g[i]);
        for (int64_t j = 0; j < d; ++j) S[i * d + j] *= e;
      }
      for (int64_t j = 0; j < d; ++j) {
        float m = 0;
        for (int64_t i = 0; i < d; ++i) m += S[i * d + j] * k[i];
        delta[size_t(j)] = (v[j] - m) * b;
      }
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t j = 0; j < d; ++j) S[i * d + j] += k[i] * delta[size_t(j)];
      }
      float* out = o + r * D + h * d;
      for (int64_t j = 0; j < d; ++j) {
        float acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += S[i * d + j] * q[i];
        out[j] = acc;
      }
    }
  }
}

// The chunked (WY) form, chunk by chunk of up to 64 rows, as
// chunk_kimi_delta_attention orders its operations; a short last chunk is the
// zero-padded one without its padding (padded rows add exact zeros).
void Chunked(const KdaParams& p, int64_t t, const DeltaInputs& in, float* state, float* o) {
  const int64_t d = p.head_dim, D = p.heads * d;
  std::vector<float> G(size_t(kChunk * d)), decay(size_t(kChunk * kChunk * d)),
      A(size_t(kChunk * kChunk)), U(size_t(kChunk * d)), W(size_t(kChunk * d)),
      vnew(size_t(kChunk * d)), row(static_cast<size_t>(kChunk));
  for (int64_t h = 0; h < p.heads; ++h) {
    float* S = state + h * d * d;
    for (int64_t c0 = 0; c0 < t; c0 += kChunk) {
      const int64_t n = std::min(kChunk, t - c0);
      auto at = [&](const std::vector<float>& x, int64_t r) { return x.data() + (c0 + r) * D + h * d; };
      auto beta = [&](int64_t r) { return in.b[size_t((c0 + r) * p.heads + h)]; };
      // Gamma: the in-chunk cumulative log decay per key channel.
      for (int64_t r = 0; r < n; ++r) {
        const float* g = at(in.g, r);
        for (int64_t i = 0; i < d; ++i) G[size_t(r * d + i)] = (r ? G[size_t((r - 1) * d + i)] : 0) + g[i];
      }
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t s = 0; s <= r; ++s) {
          for (int64_t i = 0; i < d; ++i) {
            decay[size_t((r * kChunk + s) * d + i)] = std::exp(G[size_t(r * d + i)] - G[size_t(s * d + i)]);
          }
        }
      }
      // A[r, s] = -<beta_r k_r . decay[r, s], k_s> (s < r), then (I - A)^-1 row by row.
      std::fill(A.begin(), A.end(), 0.0f);
      for (int64_t r = 0; r < n; ++r) {
        const float* kr = at(in.k, r);
        for (int64_t s = 0; s < r; ++s) {
          const float* ks = at(in.k, s);
          const float* dm = decay.data() + (r * kChunk + s) * d;
          float acc = 0;
          for (int64_t i = 0; i < d; ++i) acc += kr[i] * beta(r) * ks[i] * dm[i];
          A[size_t(r * kChunk + s)] = -acc;
        }
      }
      for (int64_t i = 1; i < n; ++i) {
        for (int64_t j = 0; j < i; ++j) row[size_t(j)] = A[size_t(i * kChunk + j)];
        for (int64_t j = 0; j < i; ++j) {
          float acc = 0;
          for (int64_t m = 0; m < i; ++m) acc += row[size_t(m)] * A[size_t(m * kChunk + j)];
          A[size_t(i * kChunk + j)] = row[size_t(j)] + acc;
        }
      }
      for (int64_t r = 0; r < n; ++r) A[size_t(r * kChunk + r)] += 1.0f;
      // U = T (beta v), W = T (beta k e^Gamma).
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < d; ++j) {
          float u = 0, w = 0;
          for (int64_t s = 0; s < n; ++s) {
            const float a = A[size_t(r * kChunk + s)];
            u += a * (at(in.v, s)[j] * beta(s));
            w += a * (at(in.k, s)[j] * beta(s) * std::exp(G[size_t(s * d + j)]));
          }
          U[size_t(r * d + j)] = u;
          W[size_t(r * d + j)] = w;
        }
      }
      // V_new = U - W S; O = (Q e^Gamma) S + P V_new; S <- e^Gamma_last S + (K e^(Gamma_last - Gamma))^T V_new.
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < d; ++j) {
          float acc = 0;
          for (int64_t i = 0; i < d; ++i) acc += W[size_t(r * d + i)] * S[i * d + j];
          vnew[size_t(r * d + j)] = U[size_t(r * d + j)] - acc;
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        const float* q = at(in.q, r);
        float* out = o + (c0 + r) * D + h * d;
        for (int64_t j = 0; j < d; ++j) {
          float acc = 0;
          for (int64_t i = 0; i < d; ++i) acc += q[i] * std::exp(G[size_t(r * d + i)]) * S[i * d + j];
          out[j] = acc;
        }
        for (int64_t s = 0; s <= r; ++s) {
          const float* ks = at(in.k, s);
          const float* dm = decay.data() + (r * kChunk + s) * d;
          float pm = 0;
          for (int64_t i = 0; i < d; ++i) pm += q[i] * ks[i] * dm[i];
          for (int64_t j = 0; j < d; ++j) out[j] += pm * vnew[size_t(s * d + j)];
        }
      }
      const float* last = G.data() + (n - 1) * d;
      for (int64_t i = 0; i < d; ++i) {
        const float e = std::exp(last[i]);
        for (int64_t j = 0; j < d; ++j) {
          float acc = 0;
          for (int64_t s = 0; s < n; ++s) {
            acc += at(in.k, s)[i] * std::exp(last[i] - G[size_t(s * d + i)]) * vnew[size_t(s * d + j)];
          }
          S[i * d + j] = S[i * d + j] * e + acc;
        }
      }
    }
  }
}

}  // namespace

void KdaSequence(const KdaParams& p, KdaForm form, int64_t t, const float* u, const float* f,
                 const float* beta, const float* gate, float* state, float* out) {
  const int64_t d = p.head_dim, D = p.heads * d;
  float* conv_rows = state;
  float* S = state + (p.conv_kernel - 1) * 3 * D;
  const DeltaInputs in = Prepare(p, t, u, f, beta, conv_rows);
  if (form == KdaForm::kRecurrent) {
    Recurrent(p, t, in, S, out);
  } else {
    Chunked(p, t, in, S, out);
  }
  // Gated RMSNorm per head: o * rsqrt(mean(o^2) + eps) * w * sigmoid(gate).
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t h = 0; h < p.heads; ++h) {
      float* o = out + r * D + h * d;
      float ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += o[i] * o[i];
      const float inv = 1.0f / std::sqrt(ss / float(d) + p.norm_eps);
      const float* g = gate + r * D + h * d;
      for (int64_t i = 0; i < d; ++i) o[i] = p.o_norm[i] * (o[i] * inv) * Sigmoid(g[i]);
    }
  }
}

}  // namespace anymoe::cpu
