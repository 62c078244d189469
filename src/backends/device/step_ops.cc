// DeviceBackend's fused entry points, which shape a decode step into few
// launches: FusedMatmul (RMSNorm, up to three projections, SwiGLU or the
// residual add in one launch) and StepAttention (RoPE, the cache writes and
// the attention of every sequence of the step in one launch, or in five for
// any step length). Where the backend's kernels do not fuse (DeviceTraits),
// the same calls run as the separate ops, through the same checks.
#include <algorithm>

#include "backends/device/device_backend.h"

namespace anymoe::device {
namespace {

using R = StagingRing;

bool SameView(const Tensor& a, const Tensor& b) {
  return a.base == b.base && a.offset == b.offset && a.rank == b.rank && a.shape == b.shape;
}

uint64_t Bytes(const Tensor& t) { return uint64_t(t.rows()) * t.row_bytes(); }

}  // namespace

void DeviceBackend::MultiMatmul(const Tensor& x, std::span<const Projection> projections) {
  if (!traits_.fused_matmul) {
    for (const Projection& p : projections) Matmul(x, *p.weight, p.bias, p.out);
    return;
  }
  if (!projections.empty()) FusedMatmul(x, projections, MatmulFusion{});
}

void DeviceBackend::FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                                const MatmulFusion& fusion) {
  CHECK(!projections.empty() && !(fusion.swiglu && fusion.residual));
  CHECK(!fusion.swiglu || projections.size() == 2);
  CHECK(!fusion.residual || projections.size() == 1);
  for (const Projection& p : projections) CheckMatmul(x, *p.weight, p.bias, p.out);
  if (fusion.norm) {
    const Tensor& w = *fusion.norm->weight;
    CHECK(w.dtype == DType::kF32 && w.elements() == x.cols());
  }
  if (fusion.swiglu) CHECK(projections[0].weight->rows() == projections[1].weight->rows());
  if (fusion.residual) {
    const Tensor& r = *fusion.residual;
    CHECK(r.dtype == DType::kF32 && r.rows() == x.rows() && r.cols() == projections[0].out.cols());
    // The kernels read all of x while they write the residual.
    CHECK(r.base != x.base || r.offset + Bytes(r) <= x.offset || x.offset + Bytes(x) <= r.offset);
  }
  if (x.rows() == 0) return;
  if (!traits_.fused_matmul) return Backend::FusedMatmul(x, projections, fusion);
  MatmulArgs m;
  m.x = x;
  if (fusion.norm) {
    m.norm = fusion.norm->weight;
    m.eps = fusion.norm->eps;
  }
  m.swiglu = fusion.swiglu;
  m.residual = fusion.residual;
  const size_t per_launch = fusion.swiglu || fusion.residual
                                ? projections.size()
                                : size_t(std::max(1, traits_.max_fused_projections));
  for (size_t i = 0; i < projections.size(); i += per_launch) {
    m.projections = projections.subspan(i, std::min(per_launch, projections.size() - i));
    RunMatmul(m);
  }
}

bool DeviceBackend::CheckStep(const AttentionStep& s) const {
  CHECK(s.q.rank == 3 && s.k.rank == 3 && s.v.rank == 3 && s.out.rank == 3 && s.rope != nullptr);
  CHECK(s.q.dtype == DType::kF32 && s.k.dtype == DType::kF32 && s.v.dtype == DType::kF32 &&
        s.out.dtype == DType::kF32);
  const int64_t t = s.q.dim(0), n_h = s.q.dim(1), d_k = s.q.dim(2);
  const int64_t n_kv = s.k.dim(1), d_v = s.v.dim(2);
  CHECK(s.k.dim(0) == t && s.v.dim(0) == t && s.k.dim(2) == d_k && s.v.dim(1) == n_kv);
  CHECK(n_kv > 0 && n_h % n_kv == 0);
  CHECK(s.out.dim(0) == t && s.out.dim(1) == n_h && s.out.dim(2) == d_v);
  CHECK(d_k <= traits_.max_head_dim && d_v <= traits_.max_head_dim);
  CHECK(int64_t(s.positions.size()) == t);
  CHECK(s.rope->rotary_offset + s.rope->rotary_dims <= d_k &&
        s.rope->inv_freq.size() >= size_t(s.rope->rotary_dims / 2));
  bool one_pool = true;
  int64_t row = 0;
  for (const AttentionSegment& g : s.segments) {
    const Tensor &kp = *g.k_pool, &vp = *g.v_pool;
    CHECK(kp.rank == 3 && vp.rank == 3 && kp.dtype == DType::kF32 && vp.dtype == DType::kF32);
    CHECK(kp.dim(1) == n_kv && kp.dim(2) == d_k && vp.dim(1) == n_kv && vp.dim(2) == d_v &&
          vp.dim(0) == kp.dim(0));
    CHECK(g.row0 == row && g.rows >= 0 && g.n_past >= 0 &&
          g.n_past + g.rows <= int64_t(g.key_rows.size()));
    for (int64_t i = 0; i < g.rows; ++i) {
      CHECK(s.positions[size_t(g.row0 + i)] == g.n_past + i);
      const int32_t new_row = g.key_rows[size_t(g.n_past + i)];
      CHECK(new_row >= 0 && new_row < kp.dim(0));
    }
    one_pool =
        one_pool && SameView(kp, *s.segments[0].k_pool) && SameView(vp, *s.segments[0].v_pool);
    row += g.rows;
  }
  CHECK(row == t);
  return one_pool;
}

// The sequences' key rows end to end, and for each step row its start in
// them, its key count and the cache row its new key goes to.
void DeviceBackend::StageKeyTables(const AttentionStep& s) {
  step_tables_.clear();
  step_starts_.clear();
  step_counts_.clear();
  step_new_rows_.clear();
  for (const AttentionSegment& g : s.segments) {
    const int32_t start = int32_t(step_tables_.size());
    step_tables_.insert(step_tables_.end(), g.key_rows.begin(),
                        g.key_rows.begin() + (g.n_past + g.rows));
    for (int64_t i = 0; i < g.rows; ++i) {
      step_starts_.push_back(start);
      step_counts_.push_back(int32_t(g.n_past + i + 1));
      step_new_rows_.push_back(g.key_rows[size_t(g.n_past + i)]);
    }
  }
}

void DeviceBackend::StepAttention(const AttentionStep& s) {
  const bool one_pool = CheckStep(s);
  if (s.q.dim(0) == 0) return;
  // Sequences in different pools: each its own calls.
  if (!one_pool) return Backend::StepAttention(s);
  StageKeyTables(s);
  const bool decode = std::all_of(s.segments.begin(), s.segments.end(),
                                  [](const AttentionSegment& g) { return g.rows == 1; });
  if (!decode || !traits_.fused_decode_attention) return BatchedStepAttention(s);
  const size_t half = size_t(s.rope->rotary_dims / 2);
  const auto tables = std::span<const int32_t>(step_tables_);
  const auto starts = std::span<const int32_t>(step_starts_);
  ring_.Begin(R::Rounded(tables.size_bytes()) + R::Rounded(starts.size_bytes()) +
              R::Rounded(s.positions.size_bytes()) + R::Rounded(half * 4));
  DecodeAttentionArgs a;
  a.q = s.q;
  a.k = s.k;
  a.v = s.v;
  a.k_pool = *s.segments[0].k_pool;
  a.v_pool = *s.segments[0].v_pool;
  a.rows = ring_.Upload(tables);
  a.starts = ring_.Upload(starts);
  a.positions = ring_.Upload(s.positions);
  a.inv_freq = ring_.Upload(s.rope->inv_freq.first(half));
  a.rope = s.rope;
  a.scale = s.scale;
  a.out = s.out;
  RunDecodeAttention(a);
}

// RoPE on q and k, the new k and v rows of every sequence in one scatter
// each, then one attention launch over every sequence's cache.
void DeviceBackend::BatchedStepAttention(const AttentionStep& s) {
  const int64_t t = s.q.dim(0), d_k = s.q.dim(2), n_kv = s.k.dim(1), d_v = s.v.dim(2);
  const Tensor& k_pool = *s.segments[0].k_pool;
  const Tensor& v_pool = *s.segments[0].v_pool;
  const int64_t pool_rows = k_pool.dim(0);
  Rope(s.q, s.positions, *s.rope);
  Rope(s.k, s.positions, *s.rope);
  ScatterRows(s.k.Reshaped({t, n_kv * d_k}), step_new_rows_,
              k_pool.Reshaped({pool_rows, n_kv * d_k}));
  ScatterRows(s.v.Reshaped({t, n_kv * d_v}), step_new_rows_,
              v_pool.Reshaped({pool_rows, n_kv * d_v}));
  const auto tables = std::span<const int32_t>(step_tables_);
  const auto starts = std::span<const int32_t>(step_starts_);
  const auto counts = std::span<const int32_t>(step_counts_);
  ring_.Begin(R::Rounded(tables.size_bytes()) + R::Rounded(starts.size_bytes()) +
              R::Rounded(counts.size_bytes()));
  AttentionArgs a = GqaAttentionArgs(s.q, k_pool, v_pool, s.scale, s.out);
  a.rows = ring_.Upload(tables);
  const Tensor staged_starts = ring_.Upload(starts), staged_counts = ring_.Upload(counts);
  a.starts = &staged_starts;
  a.counts = &staged_counts;
  RunAttention(a);
}

}  // namespace anymoe::device
