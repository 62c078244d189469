#include "backends/opencl/opencl_backend.h"

#include "backends/backend_registry.h"
#include "backends/opencl/kernel_launch.h"

namespace anymoe::opencl {
namespace {

device::DeviceTraits Traits() {
  device::DeviceTraits t;
  t.name = "opencl";
  t.kind = BackendKind::kOpenCl;
  t.max_head_dim = 16 * int64_t(kGroup);  // MAX_DV_PER_LANE in kernels/attention.cl
  t.grouped_one_buffer = true;            // experts are offsets in one cl_mem
  return t;
}

cl_mem Mem(const Tensor& t) { return static_cast<cl_mem>(t.base); }

}  // namespace

Expected<std::unique_ptr<Backend>> OpenClBackend::Create(const BackendOptions& options) {
  ASSIGN_OR_RETURN(auto rt, ClRuntime::Create(options.device));
  return std::unique_ptr<Backend>(new OpenClBackend(std::move(rt), options));
}

OpenClBackend::OpenClBackend(std::unique_ptr<ClRuntime> rt, const BackendOptions& options)
    : DeviceBackend(std::move(rt), Traits(), options),
      rt_(static_cast<ClRuntime&>(runtime())) {}

bool OpenClBackend::RunsWeightType(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kQ8_0 ||
         d == DType::kQ4_0 || d == DType::kQ4_1;
}

void OpenClBackend::RunEmbedding(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t h = table.cols();
  Launch(rt_, "embedding")
      .T(table, 1)
      .U(table.row_bytes())
      .I(int(table.dtype))
      .T(ids)
      .T(out)
      .I(h)
      .Run({size_t(h), size_t(ids.elements())});
}

void OpenClBackend::RunRmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) {
  Launch(rt_, "rms_norm")
      .T(x)
      .T(w)
      .F(eps)
      .I(x.cols())
      .T(out)
      .Run({size_t(x.rows()) * kGroup}, {kGroup});
}

void OpenClBackend::RunLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                                 const Tensor& out) {
  Launch(rt_, "layer_norm")
      .T(x)
      .T(w)
      .T(b)
      .F(eps)
      .I(x.cols())
      .T(out)
      .Run({size_t(x.rows()) * kGroup}, {kGroup});
}

void OpenClBackend::RunMatmul(const device::MatmulArgs& m) {
  CHECK(m.projections.size() == 1);
  const Projection& p = m.projections[0];
  const Tensor& x = m.x;
  const Tensor& w = *p.weight;
  const int64_t t = x.rows(), k = x.cols(), n = w.rows();
  Launch l(rt_, "matmul");
  l.T(x).T(w, 1).U(w.row_bytes()).I(int(w.dtype));
  if (p.bias) {
    l.T(*p.bias).I(1);
  } else {
    l.T(x).I(0);  // any valid buffer; unread
  }
  l.T(p.out).I(k).I(n).Run({size_t(n) * kGroup, size_t(t)}, {kGroup, 1});
}

void OpenClBackend::RunGroupedMatmul(const device::GroupedMatmulArgs& g) {
  Launch(rt_, "grouped_matmul")
      .T(g.x)
      .Buf(Mem(g.weight0))
      .T(g.locations, 8)
      .U(g.weight0.row_bytes())
      .I(int(g.weight0.dtype))
      .T(g.offsets)
      .I(g.groups)
      .T(g.y)
      .I(g.x.cols())
      .I(g.y.cols())
      .Run({size_t(g.y.cols()) * kGroup, size_t(g.rows)}, {kGroup, 1});
}

void OpenClBackend::RunRope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                            const RopeTable& rope) {
  Launch(rt_, "rope")
      .T(x)
      .I(x.dim(1))
      .I(x.dim(2))
      .T(positions)
      .T(inv_freq)
      .I(rope.rotary_dims)
      .I(rope.rotary_offset)
      .F(rope.attention_factor)
      .I(rope.pairing == RopePairing::kInterleaved)
      .Run({size_t(rope.rotary_dims / 2), size_t(x.dim(1)), size_t(x.dim(0))});
}

void OpenClBackend::RunAttention(const device::AttentionArgs& a) {
  Launch l(rt_, "attention");
  l.T(a.q).T(a.k).T(a.v).T(a.rows).I(a.rows_stride);
  if (a.counts) {
    l.T(*a.counts).I(1);
  } else {
    l.T(a.rows).I(0);  // any valid buffer; unread
  }
  l.I(a.n_past)
      .I(a.n_h)
      .I(a.group)
      .I(a.k_row)
      .I(a.v_row)
      .I(a.d_k)
      .I(a.d_v)
      .F(a.scale)
      .T(a.out)
      .Run({size_t(a.tokens * a.n_h) * kGroup}, {kGroup});
}

void OpenClBackend::RunHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w,
                                  const Tensor& y, int64_t y_stride, int64_t tokens) {
  Launch(rt_, "head_matmul")
      .T(x)
      .I(x_stride)
      .T(w)
      .T(y)
      .I(y_stride)
      .I(w.dim(0))
      .I(w.dim(1))
      .I(w.dim(2))
      .Run({size_t(w.dim(1)), size_t(w.dim(0)), size_t(tokens)});
}

void OpenClBackend::RunCopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                                   int64_t dst_col, int64_t n) {
  Launch(rt_, "copy_columns")
      .T(src)
      .I(src.cols())
      .I(src_col)
      .T(dst)
      .I(dst.cols())
      .I(dst_col)
      .Run({size_t(n), size_t(src.rows())});
}

void OpenClBackend::RunIndexerTopK(const device::IndexerArgs& a) {
  const int64_t max_keys = a.n_past + a.tokens;
  Launch(rt_, "indexer_scores")
      .T(a.q)
      .T(a.pool)
      .T(a.rows)
      .T(a.head_weights)
      .I(a.n_heads)
      .I(a.dim)
      .I(a.n_past)
      .F(a.scale)
      .T(a.scores)
      .I(max_keys)
      .Run({size_t(max_keys), size_t(a.tokens)});
  Launch(rt_, "indexer_rank")
      .T(a.scores)
      .I(a.n_past)
      .I(a.topk)
      .I(max_keys)
      .T(a.keep)
      .Run({size_t(max_keys), size_t(a.tokens)});
  Launch(rt_, "indexer_compact")
      .T(a.keep)
      .I(a.n_past)
      .I(a.topk)
      .I(max_keys)
      .T(a.selection)
      .T(a.counts)
      .Run({size_t(a.tokens)});
}

void OpenClBackend::RunRoute(const Tensor& logits, const Tensor* bias, const RouterSpec& spec,
                             const Tensor& scratch, const Tensor& ids, const Tensor& weights) {
  Launch l(rt_, "route");
  l.T(logits);
  if (bias) {
    l.T(*bias).I(1);
  } else {
    l.T(logits).I(0);
  }
  l.I(logits.cols())
      .I(spec.scoring == RouterSpec::Scoring::kSigmoid)
      .I(spec.experts_per_token)
      .I(spec.n_group)
      .I(spec.topk_group)
      .I(spec.normalize)
      .F(spec.scaling)
      .T(scratch)
      .T(ids)
      .T(weights)
      .Run({size_t(logits.rows())});
}

void OpenClBackend::RunScatterRows(const Tensor& src, const Tensor& rows, const Tensor& dst) {
  const uint64_t words = src.row_bytes() / 4;
  Launch(rt_, "scatter_rows")
      .T(src)
      .T(rows)
      .T(dst)
      .I(int64_t(words))
      .Run({size_t(words), size_t(rows.elements())});
}

void OpenClBackend::RunGatherRows(const Tensor& src, const Tensor& rows, const Tensor& dst) {
  const uint64_t words = src.row_bytes() / 4;
  Launch(rt_, "gather_rows")
      .T(src)
      .T(rows)
      .T(dst)
      .I(int64_t(words))
      .Run({size_t(words), size_t(rows.elements())});
}

void OpenClBackend::RunScatterAddRows(const Tensor& src, const Tensor& rows, const Tensor& scales,
                                      const Tensor& dst) {
  Launch(rt_, "scatter_add_rows")
      .T(src)
      .T(rows)
      .T(scales)
      .I(rows.elements())
      .T(dst)
      .I(src.cols())
      .Run({size_t(src.cols())});
}

void OpenClBackend::RunSwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  Launch(rt_, "swiglu").T(gate).T(up).T(out).Run({size_t(gate.elements())});
}

void OpenClBackend::RunAdd(const Tensor& a, const Tensor& b, const Tensor& out) {
  Launch(rt_, "add").T(a).T(b).T(out).Run({size_t(a.elements())});
}

void RegisterOpenClBackend() {
  RegisterBackend(BackendEntry{
      .name = "opencl",
      .create = &OpenClBackend::Create,
      .supports = [](Op op, DType dtype) {
        return device::DeviceSupports(op, dtype, OpenClBackend::RunsWeightType(dtype));
      }});
}

}  // namespace anymoe::opencl
