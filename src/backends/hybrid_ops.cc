// The default forms of Backend's GLM-5.3-Flash ops: inputs copied to the host
// as f32, the host kernels of backends/cpu/ (the same code on every SIMD
// target), results copied back. The CPU backend's copies are memcpys.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/hyper_connection.h"
#include "backends/cpu/kda.h"
#include "backends/cpu/kpool.h"

namespace anymoe {
namespace {

std::vector<float> Host(Backend& be, const Tensor& t) {
  std::vector<float> v(size_t(t.elements()));
  be.ReadF32(t, v);
  return v;
}

}  // namespace

void Backend::ClampedSwiGlu(const Tensor& gate, const Tensor& up, float limit, const Tensor& out) {
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  std::vector<float> g = Host(*this, gate);
  const std::vector<float> u = Host(*this, up);
  for (size_t i = 0; i < g.size(); ++i) {
    // The gate is clamped from above only, up on both sides (Glm5NextTextMLP).
    const float a = std::min(g[i], limit), b = std::clamp(u[i], -limit, limit);
    g[i] = a / (1.0f + std::exp(-a)) * b;
  }
  WriteF32(g, out);
}

void Backend::HyperConnectionWeights(const HyperConnectionSpec& spec, const Tensor& mix,
                                     const Tensor& x, const Tensor& collapsed, const Tensor& post,
                                     const Tensor& comb) {
  const int64_t t = x.rows(), n = spec.streams;
  CHECK(mix.rows() == t && mix.cols() == (2 + n) * n && x.cols() % n == 0);
  const std::vector<float> m = Host(*this, mix), xs = Host(*this, x), base = Host(*this, *spec.base),
                           scale = Host(*this, *spec.scale);
  CHECK(base.size() == size_t((2 + n) * n) && scale.size() == 3);
  std::vector<float> y(size_t(collapsed.elements())), p(size_t(post.elements())),
      c(size_t(comb.elements()));
  const cpu::HyperConnectionParams params{n, x.cols() / n, spec.sinkhorn_iters, spec.eps,
                                          base.data(), scale.data()};
  cpu::HyperConnectionWeights(params, t, m.data(), xs.data(), y.data(), p.data(), c.data());
  WriteF32(y, collapsed);
  WriteF32(p, post);
  WriteF32(c, comb);
}

void Backend::HyperConnectionExpand(const HyperConnectionSpec& spec, const Tensor& y,
                                    const Tensor& post, const Tensor& comb, const Tensor& x) {
  const int64_t t = x.rows(), n = spec.streams;
  CHECK(y.rows() == t && x.cols() == n * y.cols());
  const std::vector<float> ys = Host(*this, y), p = Host(*this, post), c = Host(*this, comb);
  std::vector<float> xs = Host(*this, x);
  const cpu::HyperConnectionParams params{n, y.cols(), spec.sinkhorn_iters, spec.eps, nullptr,
                                          nullptr};
  cpu::HyperConnectionExpand(params, t, ys.data(), p.data(), c.data(), xs.data());
  WriteF32(xs, x);
}

void Backend::MeanOfStreams(const Tensor& x, int64_t streams, const Tensor& out) {
  const int64_t t = x.rows(), h = out.cols();
  CHECK(x.cols() == streams * h && out.rows() == t);
  const std::vector<float> xs = Host(*this, x);
  std::vector<float> y(size_t(t * h));
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t c = 0; c < h; ++c) {
      float acc = 0;
      for (int64_t n = 0; n < streams; ++n) acc += xs[size_t((r * streams + n) * h + c)];
      y[size_t(r * h + c)] = acc / float(streams);
    }
  }
  WriteF32(y, out);
}

void Backend::KimiDeltaAttention(const KdaSpec& spec, bool chunked, const Tensor& u,
                                 const Tensor& f, const Tensor& beta, const Tensor& gate,
                                 const Tensor& state, const Tensor& out) {
  const std::vector<float> conv = Host(*this, *spec.conv), dt = Host(*this, *spec.dt_bias),
                           a_log = Host(*this, *spec.a_log), o_norm = Host(*this, *spec.o_norm);
  const cpu::KdaParams p{spec.heads,    spec.head_dim, spec.conv_kernel, spec.bounded_gate,
                         spec.lower_bound, spec.norm_eps, conv.data(),   dt.data(),
                         a_log.data(),  o_norm.data()};
  const int64_t t = u.rows(), d = spec.heads * spec.head_dim;
  CHECK(u.cols() == 3 * d && f.cols() == d && gate.cols() == d && beta.cols() == spec.heads);
  CHECK(state.elements() == cpu::KdaStateFloats(p) && out.rows() == t && out.cols() == d);
  const std::vector<float> us = Host(*this, u), fs = Host(*this, f), bs = Host(*this, beta),
                           gs = Host(*this, gate);
  std::vector<float> st = Host(*this, state), o(size_t(t * d));
  cpu::KdaSequence(p, chunked ? cpu::KdaForm::kChunked : cpu::KdaForm::kRecurrent, t, us.data(),
                   fs.data(), bs.data(), gs.data(), st.data(), o.data());
  WriteF32(st, state);
  WriteF32(o, out);
}

void Backend::KPoolTopK(const KPoolSpec& spec, const Tensor& q, const Tensor& head_weights,
                        const Tensor& pool, std::span<const int32_t> key_rows, int64_t n_past,
                        std::span<int32_t> selection, std::span<int32_t> counts) {
  const int64_t t = q.dim(0), d = spec.head_dim, keys = n_past + t;
  CHECK(int64_t(key_rows.size()) >= keys && pool.cols() == 2 * d);
  const std::vector<float> qs = Host(*this, q), w = Host(*this, head_weights),
                           ape = Host(*this, *spec.ape);
  // The sequence's cached rows, in position order.
  std::vector<float> rows(size_t(keys * 2 * d));
  for (int64_t i = 0; i < keys; ++i) {
    ReadF32(pool.RowSlice(key_rows[size_t(i)], 1),
            std::span(rows).subspan(size_t(i * 2 * d), size_t(2 * d)));
  }
  const cpu::KPoolParams p{spec.heads, d, spec.pool, spec.topk, spec.tail, spec.scale, ape.data()};
  cpu::KPoolSelect(p, t, n_past, qs.data(), w.data(), rows.data(), selection, counts);
}

}  // namespace anymoe
