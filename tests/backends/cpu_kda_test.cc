// KDA's two forms of the gated delta rule (backends/cpu/kda.h) against each
// other: the chunked (WY) form over a prompt of three chunks and the recurrent
// form a token at a time give the same outputs and the same final state, and a
// prefill split at any point continues to the same state as one pass. The
// forms against transformers: tests/models/glm5_next_golden_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kda.h"

namespace anymoe::cpu {
namespace {

struct Inputs {
  KdaParams p;
  std::vector<float> conv, dt, a_log, o_norm, u, f, beta, gate;
};

Inputs Random(int64_t heads, int64_t d, int64_t t, uint32_t seed) {
  Inputs in;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t size, float scale, float mean = 0) {
    v.resize(size);
    for (float& x : v) x = mean + scale * n(rng);
  };
  const int64_t D = heads * d, kc = 4;
  fill(in.conv, size_t(3 * D * kc), 0.5f);
  fill(in.dt, size_t(D), 0.5f);
  fill(in.a_log, size_t(heads), 0.5f);
  fill(in.o_norm, size_t(d), 0.1f, 1.0f);
  fill(in.u, size_t(t * 3 * D), 1.0f);
  fill(in.f, size_t(t * D), 1.0f);
  fill(in.beta, size_t(t * heads), 1.0f);
  fill(in.gate, size_t(t * D), 1.0f);
  in.p = KdaParams{heads, d, kc, true, -5.0f, 1e-5f, in.conv.data(), in.dt.data(),
                   in.a_log.data(), in.o_norm.data()};
  return in;
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Runs rows [0, t) in steps of `step` rows (1: every row recurrent).
void RunInSteps(const Inputs& in, KdaForm form, int64_t t, int64_t step, std::vector<float>& state,
         std::vector<float>& out) {
  const int64_t D = in.p.heads * in.p.head_dim;
  state.assign(size_t(KdaStateFloats(in.p)), 0.0f);
  out.assign(size_t(t * D), 0.0f);
  for (int64_t r = 0; r < t; r += step) {
    const int64_t n = std::min(step, t - r);
    KdaSequence(in.p, form, n, in.u.data() + r * 3 * D, in.f.data() + r * D,
                in.beta.data() + r * in.p.heads, in.gate.data() + r * D, state.data(),
                out.data() + r * D);
  }
}

TEST(CpuKda, ChunkedFormEqualsRecurrentFormOverThreeChunks) {
  const int64_t t = 150;  // chunks of 64, 64 and 22
  const Inputs in = Random(2, 16, t, 7);
  std::vector<float> s_rec, o_rec, s_chunk, o_chunk;
  RunInSteps(in, KdaForm::kRecurrent, t, 1, s_rec, o_rec);
  RunInSteps(in, KdaForm::kChunked, t, t, s_chunk, o_chunk);
  // f32 rounding only (the outputs are normed to unit RMS; observed 1.4e-5):
  // a wrong step of either form moves them by O(1).
  EXPECT_LT(MaxDiff(o_rec, o_chunk), 5e-5f);
  EXPECT_LT(MaxDiff(s_rec, s_chunk), 5e-5f);
  std::printf("recurrent vs chunked: outputs %.3g, state %.3g\n", MaxDiff(o_rec, o_chunk),
              MaxDiff(s_rec, s_chunk));
  // The outputs are not trivially small: the comparison has something to compare.
  float mx = 0;
  for (float v : o_rec) mx = std::max(mx, std::fabs(v));
  EXPECT_GT(mx, 0.1f);
}

TEST(CpuKda, ChunkedPrefillSplitAnywhereContinuesTheSameState) {
  const int64_t t = 100;
  const Inputs in = Random(3, 8, t, 11);
  std::vector<float> s_one, o_one;
  RunInSteps(in, KdaForm::kChunked, t, t, s_one, o_one);
  for (int64_t step : {1, 7, 37, 64}) {
    std::vector<float> s, o;
    RunInSteps(in, KdaForm::kChunked, t, step, s, o);
    EXPECT_LT(MaxDiff(o_one, o), 5e-5f) << "steps of " << step;
    EXPECT_LT(MaxDiff(s_one, s), 5e-5f) << "steps of " << step;
  }
}

TEST(CpuKda, StateStartsTheConvWindowAndDecays) {
  // With the state carried, a second run over the same rows differs from the
  // first (the conv window and S are not reset): the state is really used.
  const int64_t t = 5;
  const Inputs in = Random(1, 8, t, 3);
  std::vector<float> state, first, second;
  RunInSteps(in, KdaForm::kRecurrent, t, 1, state, first);
  const int64_t D = in.p.head_dim;
  second.assign(size_t(t * D), 0.0f);
  KdaSequence(in.p, KdaForm::kRecurrent, t, in.u.data(), in.f.data(), in.beta.data(),
              in.gate.data(), state.data(), second.data());
  EXPECT_GT(MaxDiff(first, second), 1e-3f);
}

}  // namespace
}  // namespace anymoe::cpu
