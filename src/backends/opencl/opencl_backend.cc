// The OpenCL 1.2 backend: the shared device layer (backends/device/) over
// ClRuntime, with kernels/*.cl compiled at creation; this file is its kernel
// launchers. Weights keep their file dtype on the device (f32, f16, bf16,
// q8_0, q4_0, q4_1 run natively; other dtypes are declared unsupported and
// FallbackBackend runs those ops on the CPU). Activations are f32.
// Tensor::base is a cl_mem (a sub-buffer of the arena), Tensor::offset bytes
// into it.
#include "backends/device/device_backend.h"
#include "backends/opencl/cl_runtime.h"
#include "backends/opencl/kernel_launch.h"

namespace anymoe::opencl {
namespace {

device::DeviceTraits Traits() {
  device::DeviceTraits t;
  t.name = "opencl";
  t.kind = BackendKind::kOpenCl;
  t.max_head_dim = 16 * int64_t(kGroup);  // MAX_DV_PER_LANE in kernels/attention.cl
  t.grouped_one_buffer = true;            // experts are offsets in one cl_mem
  t.fused_matmul = true;                  // kernels/matmul.cl: norm, 3 projections, epilogues
  t.max_fused_projections = 3;
  t.fused_decode_attention = true;  // kernels/attention.cl: decode_attention
  return t;
}

cl_mem Mem(const Tensor& t) { return static_cast<cl_mem>(t.base); }

class OpenClBackend final : public device::DeviceBackend {
 public:
  OpenClBackend(std::unique_ptr<ClRuntime> rt, const BackendOptions& options)
      : DeviceBackend(std::move(rt), Traits(), options), rt_(static_cast<ClRuntime&>(runtime())) {}

 private:
  bool RunsWeight(DType dtype) const override { return device::KernelsDecodeWeight(dtype); }

  void RunEmbedding(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    const int64_t h = table.cols();
    Launch(rt_, "embedding")
        .T(table, 1)
        .U(table.row_bytes())
        .I(int(table.dtype))
        .Scales(device::ScalesOf(table), table)
        .T(ids)
        .T(out)
        .I(h)
        .Run({size_t(h), size_t(ids.elements())});
  }

  void RunRmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    Launch(rt_, "rms_norm")
        .T(x)
        .T(w)
        .F(eps)
        .I(x.cols())
        .T(out)
        .Run({size_t(x.rows()) * kGroup}, {kGroup});
  }

  void RunLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                    const Tensor& out) override {
    Launch(rt_, "layer_norm")
        .T(x)
        .T(w)
        .T(b)
        .F(eps)
        .I(x.cols())
        .T(out)
        .Run({size_t(x.rows()) * kGroup}, {kGroup});
  }

  void RunMatmul(const device::MatmulArgs& m) override {
    const Tensor& x = m.x;
    const int64_t t = x.rows();
    Launch l(rt_, "matmul");
    l.T(x).I(x.cols());
    if (m.norm) {
      l.T(*m.norm).F(m.eps).I(1);
    } else {
      l.T(x).F(0.0f).I(0);  // any valid buffer; unread
    }
    // Three projection slots; unused ones repeat the first with no columns.
    int64_t columns = 0;
    for (size_t i = 0; i < 3; ++i) {
      const bool used = i < m.projections.size();
      const Projection& p = m.projections[used ? i : 0];
      const int64_t n = used ? p.weight->rows() : 0;
      l.T(*p.weight, 1).U(p.weight->row_bytes()).I(int(p.weight->dtype));
      l.Scales(device::ScalesOf(*p.weight), x);
      if (p.bias) {
        l.T(*p.bias).I(1);
      } else {
        l.T(x).I(0);
      }
      l.T(m.residual && i == 0 ? *m.residual : p.out).I(n);
      columns += n;
    }
    CHECK(m.projections.size() <= 3);
    const int epilogue = m.swiglu ? 1 : (m.residual ? 2 : 0);
    if (epilogue != 0) columns = m.projections[0].weight->rows();
    l.I(epilogue).Run({size_t(columns) * kGroup, size_t(t)}, {kGroup, 1});
  }

  void RunGroupedMatmul(const device::GroupedMatmulArgs& g) override {
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

  void RunRope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
               const RopeTable& rope) override {
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

  void RunAttention(const device::AttentionArgs& a) override {
    Launch l(rt_, "attention");
    l.T(a.q).T(a.k).T(a.v).T(a.rows);
    if (a.starts) {
      l.T(*a.starts).I(1);
    } else {
      l.T(a.rows).I(0);  // any valid buffer; unread
    }
    l.I(a.rows_stride);
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

  void RunDecodeAttention(const device::DecodeAttentionArgs& a) override {
    const int64_t t = a.q.dim(0), n_h = a.q.dim(1), n_kv = a.k.dim(1);
    const RopeTable& rope = *a.rope;
    Launch(rt_, "decode_attention")
        .T(a.q)
        .T(a.k)
        .T(a.v)
        .T(a.k_pool)
        .T(a.v_pool)
        .T(a.rows)
        .T(a.starts)
        .T(a.positions)
        .T(a.inv_freq)
        .I(rope.rotary_dims)
        .I(rope.rotary_offset)
        .F(rope.attention_factor)
        .I(rope.pairing == RopePairing::kInterleaved)
        .I(n_h)
        .I(n_h / n_kv)
        .I(a.q.dim(2))
        .I(a.v.dim(2))
        .F(a.scale)
        .T(a.out)
        .Run({size_t(t * n_h) * kGroup}, {kGroup});
  }

  void RunHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                     int64_t y_stride, int64_t tokens) override {
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

  void RunCopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                      int64_t n) override {
    Launch(rt_, "copy_columns")
        .T(src)
        .I(src.cols())
        .I(src_col)
        .T(dst)
        .I(dst.cols())
        .I(dst_col)
        .Run({size_t(n), size_t(src.rows())});
  }

  void RunIndexerTopK(const device::IndexerArgs& a) override {
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

  void RunRoute(const Tensor& logits, const Tensor* bias, const RouterSpec& spec,
                const Tensor& scratch, const Tensor& ids, const Tensor& weights) override {
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

  void RunScatterRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    MoveRows("scatter_rows", src, rows, dst);
  }

  void RunGatherRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    MoveRows("gather_rows", src, rows, dst);
  }

  // scatter_rows / gather_rows: one work-item per 4-byte word of each listed row.
  void MoveRows(const char* kernel, const Tensor& src, const Tensor& rows, const Tensor& dst) {
    const uint64_t words = src.row_bytes() / 4;
    Launch(rt_, kernel)
        .T(src)
        .T(rows)
        .T(dst)
        .I(int64_t(words))
        .Run({size_t(words), size_t(rows.elements())});
  }

  void RunScatterAddRows(const Tensor& src, const Tensor& rows, const Tensor& scales,
                         const Tensor& dst) override {
    Launch(rt_, "scatter_add_rows")
        .T(src)
        .T(rows)
        .T(scales)
        .I(rows.elements())
        .T(dst)
        .I(src.cols())
        .Run({size_t(src.cols())});
  }

  void RunSwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    Launch(rt_, "swiglu").T(gate).T(up).T(out).Run({size_t(gate.elements())});
  }

  void RunAdd(const Tensor& a, const Tensor& b, const Tensor& out) override {
    Launch(rt_, "add").T(a).T(b).T(out).Run({size_t(a.elements())});
  }

  ClRuntime& rt_;
};

}  // namespace

// Called by the plugin's entry point (generated, backends/backend_plugin.h).
BackendEntry OpenClBackendEntry() {
  return device::DeviceBackendEntry<ClRuntime, OpenClBackend, device::KernelsDecodeWeight>("opencl");
}

}  // namespace anymoe::opencl
