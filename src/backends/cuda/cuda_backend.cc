#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/host_weight.h"
#include "backends/memory_budget.h"
#include "formats/tensor_source.h"

namespace anymoe::cuda {
namespace {

namespace k = kernels;
using R = StagingRing;

static_assert(int(DType::kF32) == k::kF32 && int(DType::kF16) == k::kF16 &&
                  int(DType::kBF16) == k::kBF16 && int(DType::kQ8_0) == k::kQ8_0 &&
                  int(DType::kQ4_0) == k::kQ4_0 && int(DType::kQ4_1) == k::kQ4_1,
              "kernels::WeightType must match DType");

// Steps of up to this many tokens use the matvec kernels; longer ones cuBLAS.
constexpr int64_t kMatvecMaxTokens = k::kMatvecTokens;

// A region of the arena, returned to it when the Buffer goes.
class ArenaBuffer final : public Buffer {
 public:
  ArenaBuffer(DeviceArena& arena, Region r, uint64_t size) : arena_(arena), r_(r), size_(size) {}
  ~ArenaBuffer() override { arena_.Free(r_); }
  void* base() override { return r_.ptr; }
  uint64_t size() const override { return size_; }

 private:
  DeviceArena& arena_;
  Region r_;
  uint64_t size_;
};

// The device address a tensor view starts at.
template <typename T = float>
T* At(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.base) + t.offset);
}

DeviceWeight Weight(const Tensor& w) {
  return DeviceWeight{At<const char>(w), w.row_bytes(), int(w.dtype)};
}

bool IsWeightDtype(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kQ8_0 ||
         d == DType::kQ4_0 || d == DType::kQ4_1;
}

int I(int64_t v) {
  CHECK(v >= 0 && v <= int64_t(INT32_MAX));
  return int(v);
}
}  // namespace

Expected<std::unique_ptr<CudaBackend>> CudaBackend::Create(const BackendOptions& options) {
  ASSIGN_OR_RETURN(auto dev, CudaDevice::Create(options.device));
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(dev), options));
}

CudaBackend::CudaBackend(std::unique_ptr<CudaDevice> dev, const BackendOptions& options)
    : dev_(std::move(dev)), arena_(*dev_), options_(options) {}

bool CudaBackend::SupportsOp(Op op, DType dtype) {
  switch (op) {
    case Op::kEmbedding:
    case Op::kMatmul:
    case Op::kGroupedMatmul:
      return IsWeightDtype(dtype);
    default:
      return dtype == DType::kF32;
  }
}

DeviceInfo CudaBackend::device() const {
  return DeviceInfo{dev_->device().name, dev_->device().global_memory, arena_.capacity(),
                    ring_region_.size + gemm_region_.size, dev_->allocations()};
}

Status CudaBackend::ReserveMemory(const MemoryPlan& plan) {
  const uint64_t staging = StagingBytes(plan);
  const uint64_t gemm = DenseGemm::kTileBytes + DenseGemm::kWorkspaceBytes;
  const uint64_t slack = (plan.buffers + 3) * DeviceArena::kAlign;
  const uint64_t needed = plan.total() + staging + gemm + slack;
  const std::string breakdown =
      "weights " + BytesText(plan.weights) + ", KV cache for " + std::to_string(plan.kv_tokens) +
      " tokens " + BytesText(plan.kv_cache) + ", activations " + BytesText(plan.activations) +
      ", staging " + BytesText(staging) + ", GEMM tile and cuBLAS workspace " + BytesText(gemm) +
      ", alignment " + BytesText(slack);
  const uint64_t budget = options_.mem_budget > 0 ? options_.mem_budget : needed;
  if (budget < needed) {
    return Status::Error("cuda: the model needs " + BytesText(needed) + " of device memory (" +
                         breakdown + ") but --mem-budget allows " + BytesText(budget));
  }
  const uint64_t available = dev_->FreeBytes();
  if (budget > available) {
    return Status::Error("cuda: the model needs " + BytesText(budget) + " of device memory (" +
                         breakdown + ") but " + dev_->device().name + " has " +
                         BytesText(available) + " free");
  }
  RETURN_IF_ERROR(arena_.Reserve(budget));
  if (ring_region_.size < staging) {  // a later model may need a larger ring
    if (ring_region_.ptr != nullptr) arena_.Free(ring_region_);
    ASSIGN_OR_RETURN(ring_region_, arena_.Carve(staging, "staging"));
    RETURN_IF_ERROR(ring_.Init(dev_->compute(), ring_region_.ptr, ring_region_.size));
  }
  if (gemm_region_.ptr == nullptr) {
    ASSIGN_OR_RETURN(gemm_region_, arena_.Carve(gemm, "GEMM tile and cuBLAS workspace"));
    gemm_.Init(*dev_, gemm_region_.ptr, gemm_region_.ptr + DenseGemm::kTileBytes);
  }
  max_kv_tokens_ = std::max(max_kv_tokens_, plan.kv_tokens);
  return Status::Ok();
}

Expected<std::unique_ptr<Buffer>> CudaBackend::Allocate(uint64_t bytes, const std::string& what) {
  ASSIGN_OR_RETURN(Region r, arena_.Carve(std::max<uint64_t>(bytes, 4), what));
  return std::unique_ptr<Buffer>(new ArenaBuffer(arena_, r, bytes));
}

Status CudaBackend::ReserveForContext(int64_t max_keys) {
  if (max_keys > max_kv_tokens_) {
    return Status::Error("cuda: a cache of " + std::to_string(max_keys) + " tokens exceeds the " +
                         std::to_string(max_kv_tokens_) + " planned at load");
  }
  return Status::Ok();
}

Expected<Tensor> CudaBackend::PrepareWeight(const TensorInfo& info) {
  ASSIGN_OR_RETURN(HostWeight w, PrepareHostWeight(info));
  ASSIGN_OR_RETURN(auto buf, Allocate(w.bytes, "weight " + info.name));
  CheckCuda(cudaMemcpyAsync(buf->base(), w.tensor.base, w.bytes, cudaMemcpyHostToDevice,
                            dev_->copies()),
            "upload weight");
  CheckCuda(cudaStreamSynchronize(dev_->copies()), "cudaStreamSynchronize (upload)");
  w.tensor.base = buf->base();
  owned_.push_back(std::move(buf));
  return w.tensor;
}

void CudaBackend::Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const int64_t h = table.cols(), n = int64_t(ids.size());
  CHECK(out.cols() == h && out.rows() == n);
  for (int32_t id : ids) CHECK(id >= 0 && id < table.rows());
  ring_.Begin(R::Rounded(ids.size_bytes()));
  const int32_t* d_ids = ring_.Upload(ids);
  k::Embedding(At<const char>(table), table.row_bytes(), int(table.dtype), d_ids, I(n), At(out),
               I(h), dev_->compute());
}

void CudaBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && weight.elements() == n && out.elements() == x.elements());
  k::RmsNorm(At(x), At(weight), eps, I(x.rows()), I(n), At(out), dev_->compute());
}

void CudaBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                            const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && bias.dtype == DType::kF32 && weight.elements() == n);
  k::LayerNorm(At(x), At(weight), At(bias), eps, I(x.rows()), I(n), At(out), dev_->compute());
}

void CudaBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), kk = x.cols(), n = w.rows();
  CHECK(w.cols() == kk && y.rows() == t && y.cols() == n && IsWeightDtype(w.dtype));
  CHECK(w.dtype == DType::kF32 || w.dtype == DType::kF16 || w.dtype == DType::kBF16 ||
        kk % 32 == 0);
  const float* b = nullptr;
  if (bias) {
    CHECK(bias->dtype == DType::kF32 && bias->elements() == n);
    b = At(*bias);
  }
  if (t <= kMatvecMaxTokens) {  // decode: bandwidth-bound, weights read once
    k::Matvec(At(x), At<const char>(w), w.row_bytes(), int(w.dtype), b, At(y), I(t), I(kk), I(n),
              dev_->compute());
    return;
  }
  gemm_.Run(At(x), I(t), I(kk), Weight(w), I(n), At(y));
  if (b) k::AddBias(At(y), b, I(t), I(n), dev_->compute());
}

void CudaBackend::GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                                std::span<const int32_t> offsets, const Tensor& y) {
  const int64_t groups = int64_t(weights.size());
  CHECK(offsets.size() == weights.size() + 1 && groups > 0);
  const int64_t m = offsets.back(), kk = x.cols(), n = weights[0].rows();
  CHECK(x.rows() >= m && y.rows() >= m && y.cols() == n);
  if (m == 0) return;
  bool uniform = true;
  int64_t largest = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const Tensor& w = weights[size_t(g)];
    uniform = uniform && w.dtype == weights[0].dtype && w.rows() == n && w.cols() == kk;
    largest = std::max<int64_t>(largest, offsets[size_t(g + 1)] - offsets[size_t(g)]);
  }
  if (!uniform || largest > kMatvecMaxTokens) {
    // Prefill (or mixed expert shapes): a Matmul per group, which uses cuBLAS
    // for the groups with many rows.
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t rows = offsets[size_t(g + 1)] - offsets[size_t(g)];
      if (rows > 0) {
        Matmul(x.RowSlice(offsets[size_t(g)], rows), weights[size_t(g)], nullptr,
               y.RowSlice(offsets[size_t(g)], rows));
      }
    }
    return;
  }
  // Decode: one launch; each row finds its expert's weight address.
  std::vector<uint64_t>& addresses = expert_addresses_;  // grows once, to the expert count
  addresses.resize(size_t(groups));
  for (int64_t g = 0; g < groups; ++g) {
    addresses[size_t(g)] = reinterpret_cast<uint64_t>(At<const char>(weights[size_t(g)]));
  }
  ring_.Begin(R::Rounded(addresses.size() * 8) + R::Rounded(offsets.size_bytes()));
  const uint64_t* d_addresses = ring_.Upload(std::span<const uint64_t>(addresses));
  const int32_t* d_offsets = ring_.Upload(offsets);
  k::GroupedMatvec(At(x), reinterpret_cast<const char* const*>(d_addresses),
                   weights[0].row_bytes(), int(weights[0].dtype), d_offsets, I(groups), At(y),
                   I(m), I(kk), I(n), dev_->compute());
}

void CudaBackend::Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) {
  CHECK(x.rank == 3 && x.dim(0) == int64_t(positions.size()));
  CHECK(rope.rotary_offset + rope.rotary_dims <= x.dim(2));
  const size_t half = size_t(rope.rotary_dims / 2);
  CHECK(rope.inv_freq.size() >= half);
  ring_.Begin(R::Rounded(positions.size_bytes()) + R::Rounded(half * 4));
  const int32_t* d_pos = ring_.Upload(positions);
  const float* d_freq = ring_.Upload(rope.inv_freq.first(half));
  k::Rope(At(x), I(x.dim(0)), I(x.dim(1)), I(x.dim(2)), d_pos, d_freq, rope.rotary_dims,
          rope.rotary_offset, rope.attention_factor, rope.pairing == RopePairing::kInterleaved,
          dev_->compute());
}

void CudaBackend::Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                            std::span<const int32_t> key_rows, int64_t n_past, float scale,
                            const Tensor& out) {
  CHECK(q.rank == 3 && k_pool.rank == 3 && v_pool.rank == 3 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d_k = q.dim(2);
  const int64_t n_kv = k_pool.dim(1), d_v = v_pool.dim(2);
  CHECK(k_pool.dim(2) == d_k && n_h % n_kv == 0 && n_past + t <= int64_t(key_rows.size()));
  CHECK(d_k <= k::kMaxAttentionDim && d_v <= k::kMaxAttentionDim);
  const auto rows = key_rows.first(size_t(n_past + t));
  ring_.Begin(R::Rounded(rows.size_bytes()));
  k::AttentionArgs a;
  a.q = At(q);
  a.k = At(k_pool);
  a.v = At(v_pool);
  a.rows = ring_.Upload(rows);
  a.n_past = I(n_past);
  a.tokens = I(t);
  a.n_h = I(n_h);
  a.group = I(n_h / n_kv);
  a.k_row = I(n_kv * d_k);
  a.v_row = I(n_kv * d_v);
  a.d_k = I(d_k);
  a.d_v = I(d_v);
  a.scale = scale;
  a.out = At(out);
  k::Attention(a, dev_->compute());
}

void CudaBackend::LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                                  std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                  const KeySelection* selection, const Tensor& out) {
  CHECK(q.rank == 3 && pool.rank == 2 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d = q.dim(2);
  CHECK(pool.cols() == d && out.dim(2) == latent_dim && n_past + t <= int64_t(key_rows.size()));
  CHECK(d <= k::kMaxAttentionDim);
  // The latent row is both the key (with the rope part) and the value (without it).
  k::AttentionArgs a;
  a.q = At(q);
  a.k = At(pool);
  a.v = At(pool);
  a.n_past = I(n_past);
  a.tokens = I(t);
  a.n_h = I(n_h);
  a.group = I(n_h);  // one latent "head" for all query heads
  a.k_row = a.v_row = a.d_k = I(d);
  a.d_v = I(latent_dim);
  a.scale = scale;
  a.out = At(out);
  if (selection == nullptr) {
    const auto rows = key_rows.first(size_t(n_past + t));
    ring_.Begin(R::Rounded(rows.size_bytes()));
    a.rows = ring_.Upload(rows);
  } else {
    // Selected positions -> pool rows on the host (a gather of small ints).
    const int64_t stride = selection->stride;
    if (mapped_rows_.size() < size_t(t * stride)) mapped_rows_.resize(size_t(t * stride));
    for (int64_t ti = 0; ti < t; ++ti) {
      for (int64_t j = 0; j < selection->counts[size_t(ti)]; ++j) {
        mapped_rows_[size_t(ti * stride + j)] =
            key_rows[size_t(selection->keys[size_t(ti * stride + j)])];
      }
    }
    const auto mapped = std::span<const int32_t>(mapped_rows_).first(size_t(t * stride));
    const auto counts = selection->counts.first(size_t(t));
    ring_.Begin(R::Rounded(mapped.size_bytes()) + R::Rounded(counts.size_bytes()));
    a.rows = ring_.Upload(mapped);
    a.rows_stride = I(stride);
    a.counts = ring_.Upload(counts);
  }
  k::Attention(a, dev_->compute());
}

void CudaBackend::HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                             int64_t y_stride) {
  CHECK(w.rank == 3 && w.dtype == DType::kF32);
  const int64_t n_h = w.dim(0), d_out = w.dim(1), d_in = w.dim(2);
  CHECK(x_stride >= d_in && y_stride >= d_out && x.elements() % (n_h * x_stride) == 0);
  const int64_t t = x.elements() / (n_h * x_stride);
  CHECK(y.elements() == t * n_h * y_stride);
  k::HeadMatmul(At(x), I(x_stride), At(w), At(y), I(y_stride), I(t), I(n_h), I(d_out), I(d_in),
                dev_->compute());
}

void CudaBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                              int64_t dst_col, int64_t n) {
  CHECK(src.rows() == dst.rows() && src_col + n <= src.cols() && dst_col + n <= dst.cols());
  k::CopyColumns(At(src), I(src.cols()), I(src_col), At(dst), I(dst.cols()), I(dst_col),
                 I(src.rows()), I(n), dev_->compute());
}

void CudaBackend::IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                              std::span<const int32_t> key_rows, int64_t n_past, float scale,
                              int64_t topk, std::span<int32_t> selection,
                              std::span<int32_t> counts) {
  CHECK(q.rank == 3 && pool.rank == 2);
  const int64_t t = q.dim(0), n_heads = q.dim(1), dim = q.dim(2);
  CHECK(pool.cols() == dim && head_weights.cols() == n_heads &&
        n_past + t <= int64_t(key_rows.size()));
  CHECK(selection.size() == size_t(t * topk) && counts.size() == size_t(t));
  const int64_t max_keys = n_past + t;
  const auto rows = key_rows.first(size_t(max_keys));
  const uint64_t grid = uint64_t(t * max_keys) * 4;
  ring_.Begin(R::Rounded(rows.size_bytes()) + 2 * R::Rounded(grid) +
              R::Rounded(selection.size_bytes()) + R::Rounded(counts.size_bytes()));
  const int32_t* d_rows = ring_.Upload(rows);
  float* scores = reinterpret_cast<float*>(ring_.Take(grid));
  int32_t* keep = reinterpret_cast<int32_t*>(ring_.Take(grid));
  int32_t* d_sel = reinterpret_cast<int32_t*>(ring_.Take(selection.size_bytes()));
  int32_t* d_counts = reinterpret_cast<int32_t*>(ring_.Take(counts.size_bytes()));
  k::IndexerTopK(At(q), At(pool), d_rows, At(head_weights), I(n_heads), I(dim), I(n_past), I(t),
                 scale, I(topk), scores, keep, d_sel, d_counts, dev_->compute());
  ToHost(selection.data(), d_sel, selection.size_bytes());
  ToHost(counts.data(), d_counts, counts.size_bytes());
}

void CudaBackend::Route(const Tensor& logits, const Tensor* selection_bias,
                        const RouterSpec& spec, std::span<int32_t> ids,
                        std::span<float> weights) {
  const int64_t t = logits.rows(), e = logits.cols(), kk = spec.experts_per_token;
  const int64_t groups = std::max(spec.n_group, 1);  // per-token scratch stride, as the kernel
  CHECK(ids.size() == size_t(t * kk) && weights.size() == size_t(t * kk) && kk <= e);
  CHECK(spec.n_group <= 1 || (e % spec.n_group == 0 && spec.topk_group <= spec.n_group));
  const uint64_t scratch = uint64_t(t * (3 * e + 2 * groups)) * 4;
  ring_.Begin(R::Rounded(scratch) + R::Rounded(ids.size_bytes()) +
              R::Rounded(weights.size_bytes()));
  float* d_scratch = reinterpret_cast<float*>(ring_.Take(scratch));
  int32_t* d_ids = reinterpret_cast<int32_t*>(ring_.Take(ids.size_bytes()));
  float* d_weights = reinterpret_cast<float*>(ring_.Take(weights.size_bytes()));
  k::Route(At(logits), selection_bias ? At(*selection_bias) : nullptr, I(t), I(e),
           spec.scoring == RouterSpec::Scoring::kSigmoid, I(kk), spec.n_group, spec.topk_group,
           spec.normalize, spec.scaling, d_scratch, d_ids, d_weights, dev_->compute());
  ToHost(ids.data(), d_ids, ids.size_bytes());
  ToHost(weights.data(), d_weights, weights.size_bytes());
}

void CudaBackend::ScatterRows(const Tensor& src, std::span<const int32_t> rows,
                              const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && src.rows() == int64_t(rows.size()) && row_bytes % 4 == 0);
  for (int32_t r : rows) CHECK(r >= 0 && r < dst.rows());
  ring_.Begin(R::Rounded(rows.size_bytes()));
  const int32_t* d_rows = ring_.Upload(rows);
  k::ScatterRows(At<const uint32_t>(src), d_rows, I(int64_t(rows.size())), At<uint32_t>(dst),
                 I(int64_t(row_bytes / 4)), dev_->compute());
}

void CudaBackend::GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && dst.rows() >= int64_t(rows.size()) && row_bytes % 4 == 0);
  for (int32_t r : rows) CHECK(r >= 0 && r < src.rows());
  ring_.Begin(R::Rounded(rows.size_bytes()));
  const int32_t* d_rows = ring_.Upload(rows);
  k::GatherRows(At<const uint32_t>(src), d_rows, I(int64_t(rows.size())), At<uint32_t>(dst),
                I(int64_t(row_bytes / 4)), dev_->compute());
}

void CudaBackend::ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                                 std::span<const float> scales, const Tensor& dst) {
  const int64_t n = src.cols();
  CHECK(dst.cols() == n && rows.size() == scales.size());
  if (rows.empty()) return;
  for (int32_t r : rows) CHECK(r >= 0 && r < dst.rows());
  ring_.Begin(R::Rounded(rows.size_bytes()) + R::Rounded(scales.size_bytes()));
  const int32_t* d_rows = ring_.Upload(rows);
  const float* d_scales = ring_.Upload(scales);
  k::ScatterAddRows(At(src), d_rows, d_scales, I(int64_t(rows.size())), At(dst), I(n),
                    dev_->compute());
}

void CudaBackend::Zero(const Tensor& t) {
  const uint64_t bytes = uint64_t(t.rows()) * t.row_bytes();
  if (bytes == 0) return;
  CheckCuda(cudaMemsetAsync(At<char>(t), 0, bytes, dev_->compute()), "cudaMemsetAsync");
}

void CudaBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  k::SwiGlu(At(gate), At(up), At(out), gate.elements(), dev_->compute());
}

void CudaBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CHECK(a.elements() == b.elements() && out.elements() == a.elements());
  k::Add(At(a), At(b), At(out), a.elements(), dev_->compute());
}

void CudaBackend::Copy(const Tensor& src, const Tensor& dst) {
  CHECK(src.dtype == dst.dtype && src.elements() == dst.elements());
  const uint64_t bytes = uint64_t(src.rows()) * src.row_bytes();
  const char* s = At<const char>(src);
  char* d = At<char>(dst);
  if (bytes == 0 || s == d) return;
  CHECK(s + bytes <= d || d + bytes <= s);  // cudaMemcpy forbids overlapping ranges
  CheckCuda(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, dev_->compute()),
            "cudaMemcpyAsync (device to device)");
}

void CudaBackend::ToHost(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  dev_->CopiesAfterCompute();
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, dev_->copies()),
            "cudaMemcpyAsync (to host)");
  CheckCuda(cudaStreamSynchronize(dev_->copies()), "cudaStreamSynchronize (to host)");
}

void CudaBackend::ReadF32(const Tensor& src, std::span<float> dst) {
  CHECK(uint64_t(src.elements()) == dst.size());
  const uint64_t bytes = uint64_t(src.rows()) * src.row_bytes();
  if (src.dtype == DType::kF32) return ToHost(dst.data(), At<const char>(src), bytes);
  // Weights read back at load (MLA absorption): raw blocks, dequantised here.
  std::vector<uint8_t> raw(bytes);
  ToHost(raw.data(), At<const char>(src), bytes);
  for (int64_t r = 0; r < src.rows(); ++r) {
    DequantizeRow(src.dtype, raw.data() + r * src.row_bytes(), dst.data() + r * src.cols(),
                  src.cols());
  }
}

void CudaBackend::WriteF32(std::span<const float> src, const Tensor& dst) {
  CHECK(dst.dtype == DType::kF32 && uint64_t(dst.elements()) == src.size());
  if (src.empty()) return;
  // After whatever queued compute work still uses dst; done before returning.
  dev_->CopiesAfterCompute();
  CheckCuda(cudaMemcpyAsync(At<char>(dst), src.data(), src.size_bytes(), cudaMemcpyHostToDevice,
                            dev_->copies()),
            "cudaMemcpyAsync (from host)");
  CheckCuda(cudaStreamSynchronize(dev_->copies()), "cudaStreamSynchronize (from host)");
}

void CudaBackend::Synchronize() {
  CheckCuda(cudaStreamSynchronize(dev_->compute()), "cudaStreamSynchronize");
}

}  // namespace anymoe::cuda
