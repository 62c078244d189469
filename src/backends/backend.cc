// The default forms of Backend's fused calls: the separate ops, in the order
// the model made them before the calls were fused, so a backend that does not
// fuse (the CPU) gives exactly the unfused results.
#include "backends/backend.h"

#include <array>

namespace anymoe {

void Backend::FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                          const MatmulFusion& fusion) {
  CHECK(!(fusion.swiglu && fusion.residual));
  CHECK(!fusion.swiglu || projections.size() == 2);
  CHECK(!fusion.residual || projections.size() == 1);
  const Tensor* in = &x;
  if (fusion.norm != nullptr) {
    RmsNorm(x, *fusion.norm->weight, fusion.norm->eps, fusion.norm->out);
    in = &fusion.norm->out;
  }
  if (projections.size() == 1) {
    Matmul(*in, *projections[0].weight, projections[0].bias, projections[0].out);
  } else {
    MultiMatmul(*in, projections);
  }
  if (fusion.swiglu) SwiGlu(projections[0].out, projections[1].out, projections[0].out);
  if (fusion.residual) Add(*fusion.residual, projections[0].out, *fusion.residual);
}

void Backend::StepAttention(const AttentionStep& step) {
  Rope(step.q, step.positions, *step.rope);
  Rope(step.k, step.positions, *step.rope);
  const int64_t n_kv = step.k.dim(1), d_k = step.k.dim(2), d_v = step.v.dim(2);
  const Tensor k_rows = step.k.Reshaped({step.k.dim(0), n_kv * d_k});
  const Tensor v_rows = step.v.Reshaped({step.v.dim(0), n_kv * d_v});
  const Tensor q_rows = step.q.Reshaped({step.q.dim(0), step.q.dim(1) * step.q.dim(2)});
  const Tensor out_rows = step.out.Reshaped({step.out.dim(0), step.out.dim(1) * step.out.dim(2)});
  // Several sequences per MultiAttention call, without a heap allocation.
  constexpr size_t kJobsPerCall = 16;
  std::array<AttentionJob, kJobsPerCall> jobs;
  size_t n_jobs = 0;
  for (const AttentionSegment& s : step.segments) {
    const auto new_rows = s.key_rows.subspan(size_t(s.n_past), size_t(s.rows));
    const int64_t pool_rows = s.k_pool->dim(0);
    ScatterRows(k_rows.RowSlice(s.row0, s.rows), new_rows,
                s.k_pool->Reshaped({pool_rows, n_kv * d_k}));
    ScatterRows(v_rows.RowSlice(s.row0, s.rows), new_rows,
                s.v_pool->Reshaped({pool_rows, n_kv * d_v}));
    jobs[n_jobs++] = {q_rows.RowSlice(s.row0, s.rows).Reshaped({s.rows, step.q.dim(1), d_k}),
                      s.k_pool,
                      s.v_pool,
                      s.key_rows,
                      s.n_past,
                      out_rows.RowSlice(s.row0, s.rows).Reshaped({s.rows, step.out.dim(1), d_v})};
    if (n_jobs == kJobsPerCall || &s == &step.segments.back()) {
      MultiAttention(std::span(jobs.data(), n_jobs), step.scale);
      n_jobs = 0;
    }
  }
}

}  // namespace anymoe
