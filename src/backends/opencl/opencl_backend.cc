#include "backends/opencl/opencl_backend.h"

#include <algorithm>
#include <cstring>

#include "backends/opencl/kernel_launch.h"
#include "backends/host_weight.h"
#include "backends/memory_budget.h"
#include "formats/tensor_source.h"

namespace anymoe::opencl {
namespace {

using R = StagingRing;

// A sub-buffer of the arena, returned to it when the Buffer goes.
class ArenaBuffer final : public Buffer {
 public:
  ArenaBuffer(DeviceArena& arena, Region r, uint64_t size) : arena_(arena), r_(r), size_(size) {}
  ~ArenaBuffer() override { arena_.Free(r_); }
  void* base() override { return r_.mem; }
  uint64_t size() const override { return size_; }

 private:
  DeviceArena& arena_;
  Region r_;
  uint64_t size_;
};

cl_mem Mem(const Tensor& t) { return static_cast<cl_mem>(t.base); }

bool IsWeightDtype(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kQ8_0 ||
         d == DType::kQ4_0 || d == DType::kQ4_1;
}
}  // namespace

Expected<std::unique_ptr<OpenClBackend>> OpenClBackend::Create(const BackendOptions& options) {
  ASSIGN_OR_RETURN(auto rt, ClRuntime::Create(options.device));
  return std::unique_ptr<OpenClBackend>(new OpenClBackend(std::move(rt), options));
}

OpenClBackend::OpenClBackend(std::unique_ptr<ClRuntime> rt, const BackendOptions& options)
    : rt_(std::move(rt)), arena_(*rt_), options_(options) {}

bool OpenClBackend::Supports(Op op, DType dtype) const {
  switch (op) {
    case Op::kEmbedding:
    case Op::kMatmul:
    case Op::kGroupedMatmul:
      return IsWeightDtype(dtype);
    default:
      return dtype == DType::kF32;
  }
}

DeviceInfo OpenClBackend::device() const {
  return DeviceInfo{rt_->device().name, rt_->device().global_memory, arena_.capacity(),
                    ring_region_.size, rt_->buffers_created()};
}

Status OpenClBackend::ReserveMemory(const MemoryPlan& plan) {
  const uint64_t staging = StagingBytes(plan);
  // Each buffer is rounded up to the device's base alignment.
  const uint64_t slack = (plan.buffers + 1) * arena_.Aligned(1);
  const uint64_t needed = plan.total() + staging + slack;
  const std::string breakdown =
      "weights " + BytesText(plan.weights) + ", KV cache for " + std::to_string(plan.kv_tokens) +
      " tokens " + BytesText(plan.kv_cache) + ", activations " + BytesText(plan.activations) +
      ", staging " + BytesText(staging) + ", alignment " + BytesText(slack);
  const uint64_t budget = options_.mem_budget > 0 ? options_.mem_budget : needed;
  if (budget < needed) {
    return Status::Error("opencl: the model needs " + BytesText(needed) + " of device memory (" +
                         breakdown + ") but --mem-budget allows " + BytesText(budget));
  }
  const uint64_t available = rt_->device().global_memory;
  if (budget > available) {
    return Status::Error("opencl: the model needs " + BytesText(budget) + " of device memory (" +
                         breakdown + ") but " + rt_->device().name + " has " +
                         BytesText(available));
  }
  RETURN_IF_ERROR(arena_.Reserve(budget));
  if (ring_region_.size < staging) {  // a later model may need a larger ring
    if (ring_region_.mem != nullptr) arena_.Free(ring_region_);
    ASSIGN_OR_RETURN(ring_region_, arena_.Carve(staging, "staging"));
    ring_.Init(rt_->queue(), ring_region_.mem, ring_region_.size);
  }
  max_kv_tokens_ = std::max(max_kv_tokens_, plan.kv_tokens);
  return Status::Ok();
}

Expected<std::unique_ptr<Buffer>> OpenClBackend::Allocate(uint64_t bytes, const std::string& what) {
  ASSIGN_OR_RETURN(Region r, arena_.Carve(std::max<uint64_t>(bytes, 4), what));
  return std::unique_ptr<Buffer>(new ArenaBuffer(arena_, r, bytes));
}

Status OpenClBackend::ReserveForContext(int64_t max_keys) {
  if (max_keys > max_kv_tokens_) {
    return Status::Error("opencl: a cache of " + std::to_string(max_keys) + " tokens exceeds the " +
                         std::to_string(max_kv_tokens_) + " planned at load");
  }
  return Status::Ok();
}

Expected<Tensor> OpenClBackend::PrepareWeight(const TensorInfo& info) {
  ASSIGN_OR_RETURN(HostWeight w, PrepareHostWeight(info));
  ASSIGN_OR_RETURN(auto buf, Allocate(w.bytes, "weight " + info.name));
  CheckCl(clEnqueueWriteBuffer(rt_->queue(), static_cast<cl_mem>(buf->base()), CL_TRUE, 0,
                               w.bytes, w.tensor.base, 0, nullptr, nullptr),
          "upload weight");
  w.tensor.base = buf->base();
  owned_.push_back(std::move(buf));
  return w.tensor;
}

void OpenClBackend::Embedding(const Tensor& table, std::span<const int32_t> ids,
                              const Tensor& out) {
  const int64_t h = table.cols(), n = int64_t(ids.size());
  CHECK(out.cols() == h && out.rows() == n);
  for (int32_t id : ids) CHECK(id >= 0 && id < table.rows());
  ring_.Begin(R::Rounded(ids.size_bytes()));
  const uint64_t at = ring_.Upload(ids.data(), ids.size_bytes());
  Launch(*rt_, "embedding")
      .T(table, 1)
      .U(table.row_bytes())
      .I(int(table.dtype))
      .Mem(ring_.mem(), at / 4)
      .T(out)
      .I(h)
      .Run({size_t(h), size_t(n)});
}

void OpenClBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && weight.elements() == n && out.elements() == x.elements());
  Launch(*rt_, "rms_norm")
      .T(x)
      .T(weight)
      .F(eps)
      .I(n)
      .T(out)
      .Run({size_t(x.rows()) * kGroup}, {kGroup});
}

void OpenClBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                              const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && bias.dtype == DType::kF32 && weight.elements() == n);
  Launch(*rt_, "layer_norm")
      .T(x)
      .T(weight)
      .T(bias)
      .F(eps)
      .I(n)
      .T(out)
      .Run({size_t(x.rows()) * kGroup}, {kGroup});
}

void OpenClBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), k = x.cols(), n = w.rows();
  CHECK(w.cols() == k && y.rows() == t && y.cols() == n && IsWeightDtype(w.dtype));
  Launch l(*rt_, "matmul");
  l.T(x).T(w, 1).U(w.row_bytes()).I(int(w.dtype));
  if (bias) {
    CHECK(bias->dtype == DType::kF32 && bias->elements() == n);
    l.T(*bias).I(1);
  } else {
    l.T(x).I(0);  // any valid buffer; unread
  }
  l.T(y).I(k).I(n).Run({size_t(n) * kGroup, size_t(t)}, {kGroup, 1});
}

void OpenClBackend::GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                                  std::span<const int32_t> offsets, const Tensor& y) {
  const int64_t groups = int64_t(weights.size());
  CHECK(offsets.size() == weights.size() + 1 && groups > 0);
  const int64_t m = offsets.back(), k = x.cols(), n = weights[0].rows();
  CHECK(x.rows() >= m && y.rows() >= m && y.cols() == n);
  bool one_buffer = true;
  for (const Tensor& w : weights) {
    one_buffer = one_buffer && w.base == weights[0].base && w.dtype == weights[0].dtype &&
                 w.rows() == n && w.cols() == k;
  }
  if (!one_buffer) {  // experts in separate tensors (HF per-expert files): a launch per group
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t rows = offsets[size_t(g + 1)] - offsets[size_t(g)];
      if (rows > 0) {
        Matmul(x.RowSlice(offsets[size_t(g)], rows), weights[size_t(g)], nullptr,
               y.RowSlice(offsets[size_t(g)], rows));
      }
    }
    return;
  }
  if (m == 0) return;
  // Stacked experts (GGUF, fused HF): one launch; each row finds its expert.
  std::vector<uint64_t>& w_offs = expert_offsets_;  // grows once, to the expert count
  w_offs.resize(size_t(groups));
  for (int64_t g = 0; g < groups; ++g) w_offs[size_t(g)] = weights[size_t(g)].offset;
  ring_.Begin(R::Rounded(w_offs.size() * 8) + R::Rounded(offsets.size_bytes()));
  const uint64_t w_at = ring_.Upload(w_offs.data(), w_offs.size() * 8);
  const uint64_t o_at = ring_.Upload(offsets.data(), offsets.size_bytes());
  Launch(*rt_, "grouped_matmul")
      .T(x)
      .Buf(Mem(weights[0]))
      .Mem(ring_.mem(), w_at / 8)
      .U(weights[0].row_bytes())
      .I(int(weights[0].dtype))
      .Mem(ring_.mem(), o_at / 4)
      .I(groups)
      .T(y)
      .I(k)
      .I(n)
      .Run({size_t(n) * kGroup, size_t(m)}, {kGroup, 1});
}

void OpenClBackend::Rope(const Tensor& x, std::span<const int32_t> positions,
                         const RopeTable& rope) {
  CHECK(x.rank == 3 && x.dim(0) == int64_t(positions.size()));
  CHECK(rope.rotary_offset + rope.rotary_dims <= x.dim(2));
  const int half = rope.rotary_dims / 2;
  ring_.Begin(R::Rounded(positions.size_bytes()) + R::Rounded(size_t(half) * 4));
  const uint64_t p_at = ring_.Upload(positions.data(), positions.size_bytes());
  const uint64_t f_at = ring_.Upload(rope.inv_freq.data(), size_t(half) * 4);
  Launch(*rt_, "rope")
      .T(x)
      .I(x.dim(1))
      .I(x.dim(2))
      .Mem(ring_.mem(), p_at / 4)
      .Mem(ring_.mem(), f_at / 4)
      .I(rope.rotary_dims)
      .I(rope.rotary_offset)
      .F(rope.attention_factor)
      .I(rope.pairing == RopePairing::kInterleaved)
      .Run({size_t(half), size_t(x.dim(1)), size_t(x.dim(0))});
}

void OpenClBackend::Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                              std::span<const int32_t> key_rows, int64_t n_past, float scale,
                              const Tensor& out) {
  CHECK(q.rank == 3 && k_pool.rank == 3 && v_pool.rank == 3 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d_k = q.dim(2);
  const int64_t n_kv = k_pool.dim(1), d_v = v_pool.dim(2);
  CHECK(k_pool.dim(2) == d_k && n_h % n_kv == 0 && n_past + t <= int64_t(key_rows.size()));
  CHECK(d_v <= 16 * int64_t(kGroup));
  const auto rows = key_rows.first(size_t(n_past + t));
  ring_.Begin(R::Rounded(rows.size_bytes()));
  const uint64_t at = ring_.Upload(rows.data(), rows.size_bytes());
  Launch(*rt_, "attention")
      .T(q)
      .T(k_pool)
      .T(v_pool)
      .Mem(ring_.mem(), at / 4)
      .I(0)
      .Mem(ring_.mem(), 0)
      .I(0)
      .I(n_past)
      .I(n_h)
      .I(n_h / n_kv)
      .I(n_kv * d_k)
      .I(n_kv * d_v)
      .I(d_k)
      .I(d_v)
      .F(scale)
      .T(out)
      .Run({size_t(t * n_h) * kGroup}, {kGroup});
}

void OpenClBackend::LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                                    std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                    const KeySelection* selection, const Tensor& out) {
  CHECK(q.rank == 3 && pool.rank == 2 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d = q.dim(2);
  CHECK(pool.cols() == d && out.dim(2) == latent_dim && n_past + t <= int64_t(key_rows.size()));
  CHECK(latent_dim <= 16 * int64_t(kGroup));
  Launch l(*rt_, "attention");
  l.T(q).T(pool).T(pool);
  if (selection == nullptr) {
    const auto rows = key_rows.first(size_t(n_past + t));
    ring_.Begin(R::Rounded(rows.size_bytes()));
    const uint64_t at = ring_.Upload(rows.data(), rows.size_bytes());
    l.Mem(ring_.mem(), at / 4).I(0).Mem(ring_.mem(), 0).I(0);
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
    const uint64_t rows_bytes = uint64_t(t * stride) * 4, count_bytes = uint64_t(t) * 4;
    ring_.Begin(R::Rounded(rows_bytes) + R::Rounded(count_bytes));
    const uint64_t r_at = ring_.Upload(mapped_rows_.data(), rows_bytes);
    const uint64_t c_at = ring_.Upload(selection->counts.data(), count_bytes);
    l.Mem(ring_.mem(), r_at / 4).I(stride).Mem(ring_.mem(), c_at / 4).I(1);
  }
  // The latent is both the key (with the rope part) and the value (without it).
  l.I(n_past)
      .I(n_h)
      .I(n_h)
      .I(d)
      .I(d)
      .I(d)
      .I(latent_dim)
      .F(scale)
      .T(out)
      .Run({size_t(t * n_h) * kGroup}, {kGroup});
}

void OpenClBackend::HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                               int64_t y_stride) {
  CHECK(w.rank == 3 && w.dtype == DType::kF32);
  const int64_t n_h = w.dim(0), d_out = w.dim(1), d_in = w.dim(2);
  CHECK(x_stride >= d_in && y_stride >= d_out && x.elements() % (n_h * x_stride) == 0);
  const int64_t t = x.elements() / (n_h * x_stride);
  CHECK(y.elements() == t * n_h * y_stride);
  Launch(*rt_, "head_matmul")
      .T(x)
      .I(x_stride)
      .T(w)
      .T(y)
      .I(y_stride)
      .I(n_h)
      .I(d_out)
      .I(d_in)
      .Run({size_t(d_out), size_t(n_h), size_t(t)});
}

void OpenClBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                                int64_t dst_col, int64_t n) {
  CHECK(src.rows() == dst.rows() && src_col + n <= src.cols() && dst_col + n <= dst.cols());
  Launch(*rt_, "copy_columns")
      .T(src)
      .I(src.cols())
      .I(src_col)
      .T(dst)
      .I(dst.cols())
      .I(dst_col)
      .Run({size_t(n), size_t(src.rows())});
}

void OpenClBackend::IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
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
  const uint64_t rows_at = ring_.Upload(rows.data(), rows.size_bytes());
  const uint64_t scores_at = ring_.Take(grid), keep_at = ring_.Take(grid);
  const uint64_t sel_at = ring_.Take(selection.size_bytes()),
                 cnt_at = ring_.Take(counts.size_bytes());
  const cl_mem ring = ring_.mem();
  Launch(*rt_, "indexer_scores")
      .T(q)
      .T(pool)
      .Mem(ring, rows_at / 4)
      .T(head_weights)
      .I(n_heads)
      .I(dim)
      .I(n_past)
      .F(scale)
      .Mem(ring, scores_at / 4)
      .I(max_keys)
      .Run({size_t(max_keys), size_t(t)});
  Launch(*rt_, "indexer_rank")
      .Mem(ring, scores_at / 4)
      .I(n_past)
      .I(topk)
      .I(max_keys)
      .Mem(ring, keep_at / 4)
      .Run({size_t(max_keys), size_t(t)});
  Launch(*rt_, "indexer_compact")
      .Mem(ring, keep_at / 4)
      .I(n_past)
      .I(topk)
      .I(max_keys)
      .Mem(ring, sel_at / 4)
      .Mem(ring, cnt_at / 4)
      .Run({size_t(t)});
  CheckCl(clEnqueueReadBuffer(rt_->queue(), ring, CL_FALSE, sel_at, selection.size_bytes(),
                              selection.data(), 0, nullptr, nullptr),
          "read selection");
  CheckCl(clEnqueueReadBuffer(rt_->queue(), ring, CL_TRUE, cnt_at, counts.size_bytes(),
                              counts.data(), 0, nullptr, nullptr),
          "read counts");
}

void OpenClBackend::Route(const Tensor& logits, const Tensor* selection_bias,
                          const RouterSpec& spec, std::span<int32_t> ids,
                          std::span<float> weights) {
  const int64_t t = logits.rows(), e = logits.cols(), k = spec.experts_per_token;
  const int64_t groups = std::max(spec.n_group, 1);  // per-token scratch stride, as the kernel
  CHECK(ids.size() == size_t(t * k) && weights.size() == size_t(t * k));
  CHECK(spec.n_group <= 1 || e % spec.n_group == 0);
  const uint64_t scratch = uint64_t(t * (3 * e + 2 * groups)) * 4;
  ring_.Begin(R::Rounded(scratch) + R::Rounded(ids.size_bytes()) +
              R::Rounded(weights.size_bytes()));
  const uint64_t s_at = ring_.Take(scratch), i_at = ring_.Take(ids.size_bytes()),
                 w_at = ring_.Take(weights.size_bytes());
  const cl_mem ring = ring_.mem();
  Launch l(*rt_, "route");
  l.T(logits);
  if (selection_bias) {
    l.T(*selection_bias).I(1);
  } else {
    l.T(logits).I(0);
  }
  l.I(e)
      .I(spec.scoring == RouterSpec::Scoring::kSigmoid)
      .I(k)
      .I(spec.n_group)
      .I(spec.topk_group)
      .I(spec.normalize)
      .F(spec.scaling)
      .Mem(ring, s_at / 4)
      .Mem(ring, i_at / 4)
      .Mem(ring, w_at / 4)
      .Run({size_t(t)});
  CheckCl(clEnqueueReadBuffer(rt_->queue(), ring, CL_FALSE, i_at, ids.size_bytes(), ids.data(), 0,
                              nullptr, nullptr),
          "read expert ids");
  CheckCl(clEnqueueReadBuffer(rt_->queue(), ring, CL_TRUE, w_at, weights.size_bytes(),
                              weights.data(), 0, nullptr, nullptr),
          "read expert weights");
}

void OpenClBackend::ScatterRows(const Tensor& src, std::span<const int32_t> rows,
                                const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && src.rows() == int64_t(rows.size()) && row_bytes % 4 == 0);
  for (int32_t r : rows) CHECK(r >= 0 && r < dst.rows());
  ring_.Begin(R::Rounded(rows.size_bytes()));
  const uint64_t at = ring_.Upload(rows.data(), rows.size_bytes());
  Launch(*rt_, "scatter_rows")
      .T(src)
      .Mem(ring_.mem(), at / 4)
      .T(dst)
      .I(row_bytes / 4)
      .Run({size_t(row_bytes / 4), rows.size()});
}

void OpenClBackend::GatherRows(const Tensor& src, std::span<const int32_t> rows,
                               const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && dst.rows() >= int64_t(rows.size()) && row_bytes % 4 == 0);
  ring_.Begin(R::Rounded(rows.size_bytes()));
  const uint64_t at = ring_.Upload(rows.data(), rows.size_bytes());
  Launch(*rt_, "gather_rows")
      .T(src)
      .Mem(ring_.mem(), at / 4)
      .T(dst)
      .I(row_bytes / 4)
      .Run({size_t(row_bytes / 4), rows.size()});
}

void OpenClBackend::ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                                   std::span<const float> scales, const Tensor& dst) {
  const int64_t n = src.cols();
  CHECK(dst.cols() == n && rows.size() == scales.size());
  if (rows.empty()) return;
  ring_.Begin(R::Rounded(rows.size_bytes()) + R::Rounded(scales.size_bytes()));
  const uint64_t r_at = ring_.Upload(rows.data(), rows.size_bytes());
  const uint64_t s_at = ring_.Upload(scales.data(), scales.size_bytes());
  Launch(*rt_, "scatter_add_rows")
      .T(src)
      .Mem(ring_.mem(), r_at / 4)
      .Mem(ring_.mem(), s_at / 4)
      .I(int64_t(rows.size()))
      .T(dst)
      .I(n)
      .Run({size_t(n)});
}

void OpenClBackend::Zero(const Tensor& t) {
  const uint64_t bytes = uint64_t(t.rows()) * t.row_bytes();
  if (bytes == 0) return;
  const cl_uint zero = 0;
  CHECK(t.offset % 4 == 0 && bytes % 4 == 0);
  CheckCl(clEnqueueFillBuffer(rt_->queue(), Mem(t), &zero, sizeof(zero), t.offset, bytes, 0,
                              nullptr, nullptr),
          "clEnqueueFillBuffer");
}

void OpenClBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  Launch(*rt_, "swiglu").T(gate).T(up).T(out).Run({size_t(gate.elements())});
}

void OpenClBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CHECK(a.elements() == b.elements() && out.elements() == a.elements());
  Launch(*rt_, "add").T(a).T(b).T(out).Run({size_t(a.elements())});
}

void OpenClBackend::Copy(const Tensor& src, const Tensor& dst) {
  CHECK(src.dtype == dst.dtype && src.elements() == dst.elements());
  const uint64_t bytes = uint64_t(src.rows()) * src.row_bytes();
  if (bytes == 0 || (src.base == dst.base && src.offset == dst.offset)) return;
  // clEnqueueCopyBuffer forbids overlapping ranges of one buffer.
  CHECK(src.base != dst.base || src.offset + bytes <= dst.offset ||
        dst.offset + bytes <= src.offset);
  CheckCl(clEnqueueCopyBuffer(rt_->queue(), Mem(src), Mem(dst), src.offset, dst.offset, bytes, 0,
                              nullptr, nullptr),
          "clEnqueueCopyBuffer");
}

void OpenClBackend::ReadBytes(const Tensor& src, uint64_t bytes, void* dst) {
  CheckCl(clEnqueueReadBuffer(rt_->queue(), Mem(src), CL_TRUE, src.offset, bytes, dst, 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
}

void OpenClBackend::ReadF32(const Tensor& src, std::span<float> dst) {
  CHECK(uint64_t(src.elements()) == dst.size());
  const uint64_t bytes = uint64_t(src.rows()) * src.row_bytes();
  if (src.dtype == DType::kF32) return ReadBytes(src, bytes, dst.data());
  // Weights read back at load (MLA absorption): raw blocks, dequantised here.
  std::vector<uint8_t> raw(bytes);
  ReadBytes(src, bytes, raw.data());
  for (int64_t r = 0; r < src.rows(); ++r) {
    DequantizeRow(src.dtype, raw.data() + r * src.row_bytes(), dst.data() + r * src.cols(),
                  src.cols());
  }
}

void OpenClBackend::WriteF32(std::span<const float> src, const Tensor& dst) {
  CHECK(dst.dtype == DType::kF32 && uint64_t(dst.elements()) == src.size());
  CheckCl(clEnqueueWriteBuffer(rt_->queue(), Mem(dst), CL_TRUE, dst.offset, src.size_bytes(),
                               src.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
}

void OpenClBackend::Synchronize() { CheckCl(clFinish(rt_->queue()), "clFinish"); }

}  // namespace anymoe::opencl
