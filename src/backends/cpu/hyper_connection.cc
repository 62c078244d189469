#include "backends/cpu/hyper_connection.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace anymoe::cpu {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void HyperConnectionWeights(const HyperConnectionParams& p, int64_t t, const float* mix,
                            const float* x, float* collapsed, float* post, float* comb) {
  const int64_t N = p.streams, H = p.hidden, M = (2 + N) * N;
  const float* b_pre = p.base;
  const float* b_post = p.base + N;
  const float* b_comb = p.base + 2 * N;
  std::vector<float> pre(static_cast<size_t>(N));
  for (int64_t r = 0; r < t; ++r) {
    const float* m = mix + r * M;
    for (int64_t n = 0; n < N; ++n) {
      pre[size_t(n)] = Sigmoid(m[n] * p.scale[0] + b_pre[n]) + p.eps;
      post[r * N + n] = 2.0f * Sigmoid(m[N + n] * p.scale[1] + b_post[n]);
    }
    float* C = comb + r * N * N;
    for (int64_t i = 0; i < N; ++i) {  // softmax over each row's last index
      float mx = -INFINITY;
      for (int64_t j = 0; j < N; ++j) {
        C[i * N + j] = m[2 * N + i * N + j] * p.scale[2] + b_comb[i * N + j];
        mx = std::max(mx, C[i * N + j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < N; ++j) sum += (C[i * N + j] = std::exp(C[i * N + j] - mx));
      for (int64_t j = 0; j < N; ++j) C[i * N + j] = C[i * N + j] / sum + p.eps;
    }
    auto normalize_columns = [&] {
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t i = 0; i < N; ++i) s += C[i * N + j];
        for (int64_t i = 0; i < N; ++i) C[i * N + j] /= s + p.eps;
      }
    };
    auto normalize_rows = [&] {
      for (int64_t i = 0; i < N; ++i) {
        float s = 0;
        for (int64_t j = 0; j < N; ++j) s += C[i * N + j];
        for (int64_t j = 0; j < N; ++j) C[i * N + j] /= s + p.eps;
      }
    };
    // Sinkhorn: a column normalisation first, then (rows, columns) iters - 1 times.
    normalize_columns();
    for (int64_t it = 1; it < p.sinkhorn_iters; ++it) {
      normalize_rows();
      normalize_columns();
    }
    const float* xs = x + r * N * H;
    float* y = collapsed + r * H;
    for (int64_t c = 0; c < H; ++c) {
      float acc = 0;
      for (int64_t n = 0; n < N; ++n) acc += pre[size_t(n)] * xs[n * H + c];
      y[c] = acc;
    }
  }
}

void HyperConnectionExpand(const HyperConnectionParams& p, int64_t t, const float* y,
                           const float* post, const float* comb, float* x) {
  const int64_t N = p.streams, H = p.hidden;
  std::vector<float> old(static_cast<size_t>(N * H));
  for (int64_t r = 0; r < t; ++r) {
    float* xs = x + r * N * H;
    std::copy(xs, xs + N * H, old.begin());
    const float* C = comb + r * N * N;
    for (int64_t n = 0; n < N; ++n) {
      const float pn = post[r * N + n];
      for (int64_t c = 0; c < H; ++c) {
        float mixed = 0;
        for (int64_t m = 0; m < N; ++m) mixed += C[m * N + n] * old[size_t(m * H + c)];
        xs[n * H + c] = pn * y[r * H + c] + mixed;
      }
    }
  }
}

}  // namespace anymoe::cpu
