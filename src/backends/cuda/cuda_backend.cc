// The CUDA backend: the shared device layer (backends/device/) over
// CudaDevice; this file is its kernel launchers: cuBLAS SGEMM for prefill
// matmuls (dense_gemm.h) and CUDA kernels (kernels/*.cu) for the decode matvec
// of f32/f16/bf16/q8_0/q4_0/q4_1 weights and for every other op. Weights keep
// their file dtype on the device; other dtypes (k-quants) are declared
// unsupported and FallbackBackend runs those ops on the CPU. Activations are
// f32. Tensor::base is a device pointer (of an arena region), Tensor::offset
// bytes from it. The kernels do not fuse (DeviceTraits), so the layer makes a
// fused call's separate launches.
//
// Built and linked in CI (nvcc, sm_80 + sm_90); its kernels mirror the OpenCL
// backend's, which PoCL runs in CI. See docs/backends.md for what has and has
// not been run on a GPU.
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/dense_gemm.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/device/device_backend.h"

namespace anymoe::cuda {
namespace {

namespace k = kernels;

static_assert(int(DType::kF32) == k::kF32 && int(DType::kF16) == k::kF16 &&
                  int(DType::kBF16) == k::kBF16 && int(DType::kQ8_0) == k::kQ8_0 &&
                  int(DType::kQ4_0) == k::kQ4_0 && int(DType::kQ4_1) == k::kQ4_1 &&
                  int(DType::kIQ1_S) == k::kIQ1_S && int(DType::kIQ3_S) == k::kIQ3_S &&
                  int(DType::kMXFP4) == k::kMXFP4 && int(DType::kF8_E4M3) == k::kF8_E4M3 &&
                  int(DType::kF8_E5M2) == k::kF8_E5M2,
              "kernels::WeightType must match DType");

// Steps of up to this many tokens use the matvec kernels; longer ones cuBLAS.
constexpr int64_t kMatvecMaxTokens = k::kMatvecTokens;

device::DeviceTraits Traits() {
  device::DeviceTraits t;
  t.name = "cuda";
  t.kind = BackendKind::kCuda;
  t.max_head_dim = k::kMaxAttentionDim;
  t.grouped_max_rows = kMatvecMaxTokens;  // longer groups: a Matmul each (cuBLAS)
  t.scratch_bytes = DenseGemm::kTileBytes + DenseGemm::kWorkspaceBytes;
  t.scratch_what = "GEMM tile and cuBLAS workspace";
  return t;
}

// The device address a tensor view starts at.
template <typename T = float>
T* At(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.base) + t.offset);
}

template <typename T = float>
const T* At(const Tensor* t) {
  return t ? At<const T>(*t) : nullptr;
}

int I(int64_t v) {
  CHECK(v >= 0 && v <= int64_t(INT32_MAX));
  return int(v);
}

// An FP8 weight's block scales for the kernels (a null grid for other weights).
k::Scales ScalesOf(const Tensor& w) {
  const device::WeightScales s = device::ScalesOf(w);
  const auto* grid =
      s.buffer == nullptr
          ? nullptr
          : reinterpret_cast<const float*>(static_cast<const char*>(s.buffer) + s.grid_offset);
  return k::Scales{grid, I(s.block_rows), I(s.block_cols), I(s.grid_cols), I(s.first_row)};
}

DeviceWeight Weight(const Tensor& w) {
  return DeviceWeight{At<const char>(w), w.row_bytes(), int(w.dtype), ScalesOf(w)};
}

class CudaBackend final : public device::DeviceBackend {
 public:
  CudaBackend(std::unique_ptr<CudaDevice> dev, const BackendOptions& options)
      : DeviceBackend(std::move(dev), Traits(), options),
        dev_(static_cast<CudaDevice&>(runtime())) {}

 private:
  kernels::Stream stream() const { return kernels::Stream{dev_.compute(), &dev_}; }
  bool RunsWeight(DType dtype) const override { return device::KernelsDecodeWeight(dtype); }

  uint64_t ExpertLocation(const Tensor& w) const override {
    return reinterpret_cast<uint64_t>(At<const char>(w));
  }

  Status UseScratch(const device::Region& scratch) override {
    char* base = static_cast<char*>(scratch.handle);
    gemm_.Init(dev_, base, base + DenseGemm::kTileBytes);
    return Status::Ok();
  }

  void RunEmbedding(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    k::Embedding(At<const char>(table), table.row_bytes(), int(table.dtype), ScalesOf(table),
                 At<const int32_t>(ids), I(ids.elements()), At(out), I(table.cols()), stream());
  }

  void RunRmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    k::RmsNorm(At(x), At(w), eps, I(x.rows()), I(x.cols()), At(out), stream());
  }

  void RunLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                    const Tensor& out) override {
    k::LayerNorm(At(x), At(w), At(b), eps, I(x.rows()), I(x.cols()), At(out), stream());
  }

  void RunMatmul(const device::MatmulArgs& m) override {
    CHECK(m.projections.size() == 1);
    const Projection& p = m.projections[0];
    const Tensor& x = m.x;
    const Tensor& w = *p.weight;
    const int64_t t = x.rows(), kk = x.cols(), n = w.rows();
    const float* b = At<float>(p.bias);
    if (t <= kMatvecMaxTokens) {  // decode: bandwidth-bound, weights read once
      k::Matvec(At(x), At<const char>(w), w.row_bytes(), int(w.dtype), ScalesOf(w), b, At(p.out),
                I(t), I(kk), I(n), stream());
      return;
    }
    gemm_.Run(At(x), I(t), I(kk), Weight(w), I(n), At(p.out));
    if (b) k::AddBias(At(p.out), b, I(t), I(n), stream());
  }

  // Decode: one launch; each row finds its expert's weight address.
  void RunGroupedMatmul(const device::GroupedMatmulArgs& g) override {
    k::GroupedMatvec(At(g.x), At<const char* const>(g.locations), g.weight0.row_bytes(),
                     int(g.weight0.dtype), At<const int32_t>(g.offsets), I(g.groups), At(g.y),
                     I(g.rows), I(g.x.cols()), I(g.y.cols()), stream());
  }

  void RunRope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
               const RopeTable& rope) override {
    k::Rope(At(x), I(x.dim(0)), I(x.dim(1)), I(x.dim(2)), At<const int32_t>(positions),
            At<const float>(inv_freq), rope.rotary_dims, rope.rotary_offset, rope.attention_factor,
            rope.pairing == RopePairing::kInterleaved, stream());
  }

  void RunAttention(const device::AttentionArgs& a) override {
    k::AttentionArgs args;
    args.q = At(a.q);
    args.k = At(a.k);
    args.v = At(a.v);
    args.rows = At<const int32_t>(a.rows);
    args.starts = At<int32_t>(a.starts);
    args.rows_stride = I(a.rows_stride);
    args.counts = At<int32_t>(a.counts);
    args.n_past = I(a.n_past);
    args.tokens = I(a.tokens);
    args.n_h = I(a.n_h);
    args.group = I(a.group);
    args.k_row = I(a.k_row);
    args.v_row = I(a.v_row);
    args.d_k = I(a.d_k);
    args.d_v = I(a.d_v);
    args.scale = a.scale;
    args.out = At(a.out);
    k::Attention(args, stream());
  }

  void RunHeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                     int64_t y_stride, int64_t tokens) override {
    k::HeadMatmul(At(x), I(x_stride), At(w), At(y), I(y_stride), I(tokens), I(w.dim(0)),
                  I(w.dim(1)), I(w.dim(2)), stream());
  }

  void RunCopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                      int64_t n) override {
    k::CopyColumns(At(src), I(src.cols()), I(src_col), At(dst), I(dst.cols()), I(dst_col),
                   I(src.rows()), I(n), stream());
  }

  void RunIndexerTopK(const device::IndexerArgs& a) override {
    k::IndexerTopK(At(a.q), At(a.pool), At<const int32_t>(a.rows), At(a.head_weights), I(a.n_heads),
                   I(a.dim), I(a.n_past), I(a.tokens), a.scale, I(a.topk), At(a.scores),
                   At<int32_t>(a.keep), At<int32_t>(a.selection), At<int32_t>(a.counts), stream());
  }

  void RunRoute(const Tensor& logits, const Tensor* bias, const RouterSpec& spec,
                const Tensor& scratch, const Tensor& ids, const Tensor& weights) override {
    k::Route(At(logits), At<float>(bias), I(logits.rows()), I(logits.cols()),
             spec.scoring == RouterSpec::Scoring::kSigmoid, spec.experts_per_token, spec.n_group,
             spec.topk_group, spec.normalize, spec.scaling, At(scratch), At<int32_t>(ids),
             At(weights), stream());
  }

  void RunScatterRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    k::ScatterRows(At<const uint32_t>(src), At<const int32_t>(rows), I(rows.elements()),
                   At<uint32_t>(dst), I(int64_t(src.row_bytes() / 4)), stream());
  }

  void RunGatherRows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    k::GatherRows(At<const uint32_t>(src), At<const int32_t>(rows), I(rows.elements()),
                  At<uint32_t>(dst), I(int64_t(src.row_bytes() / 4)), stream());
  }

  void RunScatterAddRows(const Tensor& src, const Tensor& rows, const Tensor& scales,
                         const Tensor& dst) override {
    k::ScatterAddRows(At(src), At<const int32_t>(rows), At<const float>(scales), I(rows.elements()),
                      At(dst), I(src.cols()), stream());
  }

  void RunSwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    k::SwiGlu(At(gate), At(up), At(out), gate.elements(), stream());
  }

  void RunAdd(const Tensor& a, const Tensor& b, const Tensor& out) override {
    k::Add(At(a), At(b), At(out), a.elements(), stream());
  }

  CudaDevice& dev_;
  DenseGemm gemm_;
};

}  // namespace

// Called by the plugin's entry point (generated, backends/backend_plugin.h).
BackendEntry CudaBackendEntry() {
  return device::DeviceBackendEntry<CudaDevice, CudaBackend, device::KernelsDecodeWeight>("cuda");
}

}  // namespace anymoe::cuda
