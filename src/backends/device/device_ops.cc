// DeviceBackend's op entry points: each checks the op's contract (shapes,
// dtypes, row indices), stages the host arrays the kernel reads, calls the
// backend's launcher and, for ops that decide something for the host (Route,
// IndexerTopK), reads the result back. The checks hold for every device, so a
// new backend's kernels can rely on them.
#include <algorithm>

#include "backends/device/device_backend.h"
#include "backends/op_checks.h"

namespace anymoe::device {
namespace {

using R = StagingRing;

void CheckRows(std::span<const int32_t> rows, int64_t limit) {
  for (int32_t r : rows) CHECK(r >= 0 && r < limit);
}

}  // namespace

void DeviceBackend::Embedding(const Tensor& table, std::span<const int32_t> ids,
                              const Tensor& out) {
  const int64_t h = table.cols(), n = int64_t(ids.size());
  CHECK(out.dtype == DType::kF32 && out.cols() == h && out.rows() == n);
  CheckRows(ids, table.rows());
  if (n == 0) return;
  ring_.Begin(R::Rounded(ids.size_bytes()));
  RunEmbedding(table, ring_.Upload(ids), out);
}

void DeviceBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(x.dtype == DType::kF32 && weight.dtype == DType::kF32 && weight.elements() == n &&
        out.elements() == x.elements());
  if (x.rows() > 0) RunRmsNorm(x, weight, eps, out);
}

void DeviceBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                              const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(x.dtype == DType::kF32 && weight.dtype == DType::kF32 && bias.dtype == DType::kF32 &&
        weight.elements() == n && bias.elements() == n && out.elements() == x.elements());
  if (x.rows() > 0) RunLayerNorm(x, weight, bias, eps, out);
}

void DeviceBackend::CheckMatmul(const Tensor& x, const Tensor& w, const Tensor* bias,
                                const Tensor& y) const {
  const int64_t t = x.rows(), k = x.cols(), n = w.rows();
  CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
  CHECK(w.cols() == k && y.rows() == t && y.cols() == n && RunsWeight(w.dtype));
  CHECK(k % Info(w.dtype).block_elems == 0);
  if (bias) CHECK(bias->dtype == DType::kF32 && bias->elements() == n);
}

void DeviceBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  CheckMatmul(x, w, bias, y);
  if (x.rows() == 0 || w.rows() == 0) return;
  const Projection p{&w, bias, y};
  RunMatmul(MatmulArgs{.x = x, .projections = std::span(&p, 1)});
}

void DeviceBackend::GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                                  std::span<const int32_t> offsets, const Tensor& y) {
  const int64_t groups = int64_t(weights.size());
  CHECK(offsets.size() == weights.size() + 1 && groups > 0);
  const int64_t m = offsets.back(), k = x.cols(), n = weights[0].rows();
  CHECK(x.rows() >= m && y.rows() >= m && y.cols() == n);
  if (m == offsets[0]) return;  // no rows
  const Tensor& w0 = weights[0];
  bool uniform = true;
  int64_t largest = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const Tensor& w = weights[size_t(g)];
    // FP8 weights with block scales go one Matmul per group: the grouped
    // kernels know no scales.
    uniform = uniform && w.dtype == w0.dtype && w.rows() == n && w.cols() == k && !w.scales &&
              (!traits_.grouped_one_buffer || w.base == w0.base);
    CHECK(offsets[size_t(g)] <= offsets[size_t(g + 1)]);
    largest = std::max<int64_t>(largest, offsets[size_t(g + 1)] - offsets[size_t(g)]);
  }
  if (!uniform || largest > traits_.grouped_max_rows) {
    // Experts in separate buffers, block-scaled, or long groups (prefill): a
    // Matmul per group.
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t rows = offsets[size_t(g + 1)] - offsets[size_t(g)];
      if (rows > 0) {
        Matmul(x.RowSlice(offsets[size_t(g)], rows), weights[size_t(g)], nullptr,
               y.RowSlice(offsets[size_t(g)], rows));
      }
    }
    return;
  }
  // The kernels run rows [0, m) and find each row's group from the offsets:
  // a call over a run of groups whose rows start past 0 (streamed experts run
  // as they arrive) is shifted to its own rows.
  const int64_t first = offsets[0];
  CheckMatmul(x.RowSlice(first, m - first), w0, nullptr, y.RowSlice(first, m - first));
  expert_locations_.resize(size_t(groups));  // grows once, to the expert count
  for (int64_t g = 0; g < groups; ++g) {
    expert_locations_[size_t(g)] = ExpertLocation(weights[size_t(g)]);
  }
  std::span<const int32_t> run_offsets = offsets;
  if (first > 0) {
    shifted_offsets_.resize(offsets.size());  // grows once, to the expert count + 1
    for (size_t g = 0; g < offsets.size(); ++g) shifted_offsets_[g] = offsets[g] - int32_t(first);
    run_offsets = shifted_offsets_;
  }
  ring_.Begin(R::Rounded(expert_locations_.size() * 8) + R::Rounded(offsets.size_bytes()));
  const Tensor locations = ring_.Upload(std::span<const uint64_t>(expert_locations_));
  const Tensor staged_offsets = ring_.Upload(run_offsets);
  RunGroupedMatmul(GroupedMatmulArgs{x.RowSlice(first, m - first), w0, locations, staged_offsets,
                                     groups, m - first, y.RowSlice(first, m - first)});
}

void DeviceBackend::Rope(const Tensor& x, std::span<const int32_t> positions,
                         const RopeTable& rope) {
  CHECK(x.dtype == DType::kF32 && x.rank == 3 && x.dim(0) == int64_t(positions.size()));
  CHECK(rope.rotary_offset + rope.rotary_dims <= x.dim(2));
  const size_t half = size_t(rope.rotary_dims / 2);
  CHECK(rope.inv_freq.size() >= half);
  if (positions.empty() || half == 0 || x.dim(1) == 0) return;
  ring_.Begin(R::Rounded(positions.size_bytes()) + R::Rounded(half * 4));
  const Tensor staged_positions = ring_.Upload(positions);
  RunRope(x, staged_positions, ring_.Upload(rope.inv_freq.first(half)), rope);
}

void DeviceBackend::Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                              std::span<const int32_t> key_rows, int64_t n_past, float scale,
                              const Tensor& out) {
  CHECK(q.rank == 3 && k_pool.rank == 3 && v_pool.rank == 3 && out.rank == 3);
  CHECK(k_pool.dtype == DType::kF32 && v_pool.dtype == DType::kF32);
  const int64_t t = q.dim(0), n_h = q.dim(1), d_k = q.dim(2);
  const int64_t n_kv = k_pool.dim(1), d_v = v_pool.dim(2);
  CHECK(k_pool.dim(2) == d_k && v_pool.dim(1) == n_kv && n_h % n_kv == 0);
  CHECK(out.dim(0) == t && out.dim(1) == n_h && out.dim(2) == d_v);
  CHECK(n_past + t <= int64_t(key_rows.size()));
  CHECK(d_k <= traits_.max_head_dim && d_v <= traits_.max_head_dim);
  if (t == 0) return;
  const auto rows = key_rows.first(size_t(n_past + t));
  ring_.Begin(R::Rounded(rows.size_bytes()));
  AttentionArgs a = GqaAttentionArgs(q, k_pool, v_pool, scale, out);
  a.rows = ring_.Upload(rows);
  a.n_past = n_past;
  RunAttention(a);
}

void DeviceBackend::LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                                    std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                    const KeySelection* selection, const Tensor& out) {
  CHECK(q.rank == 3 && pool.rank == 2 && out.rank == 3 && pool.dtype == DType::kF32);
  const int64_t t = q.dim(0), n_h = q.dim(1), d = q.dim(2);
  CHECK(pool.cols() == d && latent_dim <= d && out.dim(2) == latent_dim);
  CHECK(n_past + t <= int64_t(key_rows.size()) && d <= traits_.max_head_dim);
  if (t == 0) return;
  // The latent row is both the key (with the rope part) and the value (without it).
  AttentionArgs a;
  a.q = q;
  a.k = pool;
  a.v = pool;
  a.n_past = n_past;
  a.tokens = t;
  a.n_h = n_h;
  a.group = n_h;  // one latent "head" for all query heads
  a.k_row = a.v_row = a.d_k = d;
  a.d_v = latent_dim;
  a.scale = scale;
  a.out = out;
  Tensor counts;
  if (selection == nullptr) {
    const auto rows = key_rows.first(size_t(n_past + t));
    ring_.Begin(R::Rounded(rows.size_bytes()));
    a.rows = ring_.Upload(rows);
  } else {
    // Selected positions -> pool rows on the host (a gather of small ints).
    const int64_t stride = selection->stride;
    CHECK(int64_t(selection->counts.size()) >= t && int64_t(selection->keys.size()) >= t * stride);
    if (mapped_rows_.size() < size_t(t * stride)) mapped_rows_.resize(size_t(t * stride));
    for (int64_t ti = 0; ti < t; ++ti) {
      const int32_t count = selection->counts[size_t(ti)];
      CHECK(count >= 0 && count <= stride);
      for (int64_t j = 0; j < count; ++j) {
        const int32_t position = selection->keys[size_t(ti * stride + j)];
        CHECK(position >= 0 && position <= n_past + ti);
        mapped_rows_[size_t(ti * stride + j)] = key_rows[size_t(position)];
      }
    }
    const auto mapped = std::span<const int32_t>(mapped_rows_).first(size_t(t * stride));
    const auto selected = selection->counts.first(size_t(t));
    ring_.Begin(R::Rounded(mapped.size_bytes()) + R::Rounded(selected.size_bytes()));
    a.rows = ring_.Upload(mapped);
    a.rows_stride = stride;
    counts = ring_.Upload(selected);
    a.counts = &counts;
  }
  RunAttention(a);
}

void DeviceBackend::HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                               int64_t y_stride) {
  const int64_t t = CheckHeadMatmul(x, x_stride, w, y, y_stride);
  const int64_t n_h = w.dim(0), d_out = w.dim(1);
  if (t > 0 && n_h > 0 && d_out > 0) RunHeadMatmul(x, x_stride, w, y, y_stride, t);
}

void DeviceBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                                int64_t dst_col, int64_t n) {
  CHECK(src.rows() == dst.rows() && src_col >= 0 && dst_col >= 0 && n >= 0);
  CHECK(src_col + n <= src.cols() && dst_col + n <= dst.cols());
  if (n > 0 && src.rows() > 0) RunCopyColumns(src, src_col, dst, dst_col, n);
}

void DeviceBackend::IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                                std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                int64_t topk, std::span<int32_t> selection,
                                std::span<int32_t> counts) {
  CheckIndexerTopK(q, pool, head_weights, key_rows, n_past, topk, selection, counts);
  const int64_t t = q.dim(0), n_heads = q.dim(1), dim = q.dim(2);
  if (t == 0) return;
  const int64_t max_keys = n_past + t;
  const auto rows = key_rows.first(size_t(max_keys));
  const uint64_t grid = uint64_t(t * max_keys) * 4;
  ring_.Begin(R::Rounded(rows.size_bytes()) + 2 * R::Rounded(grid) +
              R::Rounded(selection.size_bytes()) + R::Rounded(counts.size_bytes()));
  IndexerArgs a;
  a.q = q;
  a.pool = pool;
  a.head_weights = head_weights;
  a.rows = ring_.Upload(rows);
  a.n_heads = n_heads;
  a.dim = dim;
  a.n_past = n_past;
  a.tokens = t;
  a.topk = topk;
  a.scale = scale;
  a.scores = ring_.Take(t * max_keys, DType::kF32);
  a.keep = ring_.Take(t * max_keys, DType::kI32);
  a.selection = ring_.Take(t * topk, DType::kI32);
  a.counts = ring_.Take(t, DType::kI32);
  RunIndexerTopK(a);
  ReadBytes(a.selection, selection.size_bytes(), selection.data());
  ReadBytes(a.counts, counts.size_bytes(), counts.data());
}

void DeviceBackend::Route(const Tensor& logits, const Tensor* selection_bias,
                          const RouterSpec& spec, std::span<int32_t> ids,
                          std::span<float> weights) {
  const int64_t t = logits.rows(), e = logits.cols(), k = spec.experts_per_token;
  const int64_t groups = std::max(spec.n_group, 1);  // per-token scratch stride, as the kernels
  CHECK(logits.dtype == DType::kF32 && k > 0 && k <= e);
  CHECK(ids.size() == size_t(t * k) && weights.size() == size_t(t * k));
  CHECK(spec.n_group <= 1 || (e % spec.n_group == 0 && spec.topk_group <= spec.n_group));
  if (selection_bias)
    CHECK(selection_bias->dtype == DType::kF32 && selection_bias->elements() == e);
  if (t == 0) return;
  const int64_t scratch = t * (3 * e + 2 * groups);
  ring_.Begin(R::Rounded(uint64_t(scratch) * 4) + R::Rounded(ids.size_bytes()) +
              R::Rounded(weights.size_bytes()));
  const Tensor d_scratch = ring_.Take(scratch, DType::kF32);
  const Tensor d_ids = ring_.Take(t * k, DType::kI32);
  const Tensor d_weights = ring_.Take(t * k, DType::kF32);
  RunRoute(logits, selection_bias, spec, d_scratch, d_ids, d_weights);
  ReadBytes(d_ids, ids.size_bytes(), ids.data());
  ReadBytes(d_weights, weights.size_bytes(), weights.data());
}

void DeviceBackend::ScatterRows(const Tensor& src, std::span<const int32_t> rows,
                                const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && src.rows() == int64_t(rows.size()) && row_bytes % 4 == 0);
  CheckRows(rows, dst.rows());
  if (rows.empty() || row_bytes == 0) return;
  ring_.Begin(R::Rounded(rows.size_bytes()));
  RunScatterRows(src, ring_.Upload(rows), dst);
}

void DeviceBackend::GatherRows(const Tensor& src, std::span<const int32_t> rows,
                               const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && dst.rows() >= int64_t(rows.size()) && row_bytes % 4 == 0);
  CheckRows(rows, src.rows());
  if (rows.empty() || row_bytes == 0) return;
  ring_.Begin(R::Rounded(rows.size_bytes()));
  RunGatherRows(src, ring_.Upload(rows), dst);
}

void DeviceBackend::ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                                   std::span<const float> scales, const Tensor& dst) {
  CHECK(src.dtype == DType::kF32 && dst.dtype == DType::kF32);
  CHECK(dst.cols() == src.cols() && rows.size() == scales.size() &&
        src.rows() >= int64_t(rows.size()));
  CheckRows(rows, dst.rows());
  if (rows.empty() || src.cols() == 0) return;
  ring_.Begin(R::Rounded(rows.size_bytes()) + R::Rounded(scales.size_bytes()));
  const Tensor d_rows = ring_.Upload(rows);
  RunScatterAddRows(src, d_rows, ring_.Upload(scales), dst);
}

void DeviceBackend::Zero(const Tensor& t) {
  const uint64_t bytes = uint64_t(t.rows()) * t.row_bytes();
  if (bytes == 0) return;
  CHECK(t.offset % 4 == 0 && bytes % 4 == 0);
  rt_->FillZero(t.base, t.offset, bytes);
}

void DeviceBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CHECK(gate.dtype == DType::kF32 && up.dtype == DType::kF32 && out.dtype == DType::kF32);
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  if (gate.elements() > 0) RunSwiGlu(gate, up, out);
}

void DeviceBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CHECK(a.dtype == DType::kF32 && b.dtype == DType::kF32 && out.dtype == DType::kF32);
  CHECK(a.elements() == b.elements() && out.elements() == a.elements());
  if (a.elements() > 0) RunAdd(a, b, out);
}

void DeviceBackend::Copy(const Tensor& src, const Tensor& dst) {
  CHECK(src.dtype == dst.dtype && src.elements() == dst.elements());
  const uint64_t bytes = uint64_t(src.rows()) * src.row_bytes();
  if (bytes == 0 || (src.base == dst.base && src.offset == dst.offset)) return;
  // Regions of different buffers never overlap; device copies forbid overlap within one.
  CHECK(src.base != dst.base || src.offset + bytes <= dst.offset ||
        dst.offset + bytes <= src.offset);
  rt_->Copy(src.base, src.offset, dst.base, dst.offset, bytes);
}

}  // namespace anymoe::device
