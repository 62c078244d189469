#include "backends/cpu/matmul.h"

#include <algorithm>
#include <array>

#include "backends/cpu/kernels/float_matmul.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"

namespace anymoe::cpu {
namespace {

// Rows of W per task of the f32 path: few enough to balance 2+ threads, and a
// dequantised tile (32 x k f32) stays in L2.
constexpr int64_t kTileRows = 32;

void AddBias(const Tensor* bias, int64_t t, int64_t out, float* y) {
  if (bias == nullptr) return;
  const float* b = bias->as<const float>();
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < out; ++j) y[i * out + j] += b[j];
  }
}

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

// Rows of W per task for the integer kernels: about kTasksPerThread tasks per
// thread, in whole groups of 8 rows (the kernels take 4 weight rows at a time),
// within [min_rows, max_rows]. Every task starts cold (the kernel's prefetch
// runs two row groups ahead of itself), and on SmolLM2 / the MoE bench file
// that start costs more than the imbalance of few large tasks: decode tg64 at
// 2 threads rose 159 -> 221 t/s (SmolLM2 Q8_0) and 133 -> 161 (MoE Q8_0) going
// from 8 tasks per thread and tiles of at most 256 / 64 rows to this.
constexpr int64_t kTasksPerThread = 2;

int64_t TileRows(int64_t total_rows, int64_t min_rows, int64_t max_rows, int threads) {
  const int64_t even = (total_rows + kTasksPerThread * threads - 1) / (kTasksPerThread * threads);
  return std::clamp<int64_t>((even + 7) / 8 * 8, min_rows, std::max(min_rows, max_rows));
}

size_t RoundUp64(size_t n) { return (n + 63) / 64 * 64; }

// Runs quantise(r0, r1) over [0, t): on one thread below kSerialElements
// (~1.5 us of work at ~0.38 ns per element, against ~0.3 us for a region of
// two tasks here), else in chunks of up to 8 rows with at least one chunk per
// thread, so a batched decode step's 8 rows split between the threads too (a
// prefill step quantised serially left the other thread idle for ~5% of a
// batched serving run).
void QuantizeInParallel(ThreadPool& pool, int64_t t, int64_t k,
                        FunctionRef<void(int64_t, int64_t)> quantise) {
  constexpr int64_t kSerialElements = 4096, kMaxChunkRows = 8;
  if (t < 2 || t * k < kSerialElements) return quantise(0, t);
  const int64_t threads = pool.num_threads();
  const int64_t chunk_rows = std::min(kMaxChunkRows, (t + threads - 1) / threads);
  pool.ParallelFor((t + chunk_rows - 1) / chunk_rows, [&](int64_t chunk, int) {
    quantise(chunk * chunk_rows, std::min(t, (chunk + 1) * chunk_rows));
  });
}

// Where the integer kernels read w in the panel layout: null when w has no
// panels or this view does not start on a whole group of 8 rows.
const uint8_t* PanelsOf(const Tensor& w) {
  if (w.panels == nullptr || w.rows() % kernels::kPanelRows != 0) return nullptr;
  if (w.offset % (kernels::kPanelRows * w.row_bytes()) != 0) return nullptr;
  return static_cast<const uint8_t*>(w.panels) + w.offset;
}

// Rows [n0, n1) of x . w^T from the quantised activations qx, in whichever
// layout w has (both give the same bits). n0 and n1 are multiples of 8 or w.rows().
void IntegerRows(const Tensor& w, const void* qx, int64_t t, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  if (const uint8_t* panels = PanelsOf(w)) {
    return kernels::PanelMatmulRows(w.dtype, panels, w.row_bytes(), qx, t, w.cols(), n0, n1, y,
                                    ldy);
  }
  kernels::QuantMatmulRows(w.dtype, w.as<const uint8_t>(), w.row_bytes(), qx, t, w.cols(), n0, n1,
                           y, ldy);
}

// Integer (or widening) kernels straight from the weight blocks, every
// projection in one parallel pass over (projection, row tile) tasks.
void QuantMultiMatmul(ThreadPool& pool, FunctionRef<float*(uint64_t)> shared, const Tensor& x,
                      std::span<const Projection> projections) {
  constexpr size_t kMaxProjections = 8;
  CHECK(projections.size() <= kMaxProjections);
  const int64_t t = x.rows(), in = x.cols();
  // At most two activation forms: int8 blocks (one layout for every quantised
  // type) and f32 for f16/bf16 weights.
  DType quantised = DType::kF32, half = DType::kF32;
  for (const Projection& p : projections) {
    (IsHalf(p.weight->dtype) ? half : quantised) = p.weight->dtype;
  }
  const size_t q_bytes =
      quantised == DType::kF32 ? 0 : RoundUp64(kernels::QuantizedActivationBytes(quantised, t, in));
  const size_t h_bytes = half == DType::kF32 ? 0 : kernels::QuantizedActivationBytes(half, t, in);
  auto* buffer = reinterpret_cast<uint8_t*>(shared((q_bytes + h_bytes) / sizeof(float) + 1));
  QuantizeInParallel(pool, t, in, [&](int64_t r0, int64_t r1) {
    const float* xp = x.as<const float>();
    if (q_bytes) kernels::QuantizeActivationRows(quantised, xp, t, in, r0, r1, buffer);
    if (h_bytes) kernels::QuantizeActivationRows(half, xp, t, in, r0, r1, buffer + q_bytes);
  });

  // The projections' rows end to end, cut into tasks of `tile` rows: a task
  // may finish one projection and start the next. Tiles within each
  // projection instead left QKV (576 + 192 + 192 rows on SmolLM2) with tasks
  // of 240, 240, 96, 192 and 192 rows, and its regions waited ~7 % of their
  // time at the end against ~4 % for the even ones. Each projection starts on
  // a whole group of 8 rows, as the kernels take them.
  std::array<int64_t, kMaxProjections + 1> first_row{};
  for (size_t p = 0; p < projections.size(); ++p) {
    first_row[p + 1] = first_row[p] + (projections[p].weight->rows() + 7) / 8 * 8;
  }
  const int64_t span = first_row[projections.size()];
  const int64_t tile = TileRows(span, 8, span, pool.num_threads());
  pool.ParallelFor((span + tile - 1) / tile, [&](int64_t task, int) {
    const int64_t r0 = task * tile, r1 = std::min(span, r0 + tile);
    for (size_t p = 0; p < projections.size(); ++p) {
      const Tensor& w = *projections[p].weight;
      const Tensor& y = projections[p].out;
      const int64_t n0 = std::max(r0, first_row[p]) - first_row[p];
      const int64_t n1 = std::min(r1 - first_row[p], w.rows());
      if (n0 >= n1) continue;
      IntegerRows(w, IsHalf(w.dtype) ? buffer + q_bytes : buffer, t, n0, n1, y.as<float>(),
                  y.cols());
    }
  });
  for (const Projection& p : projections) AddBias(p.bias, t, p.out.cols(), p.out.as<float>());
}

}  // namespace

// f16/bf16 kernels keep x in f32, so they are exact whatever `exact` says.
bool UseIntegerKernels(bool exact, DType w, int64_t t, int64_t in) {
  if (!kernels::IsQuantMatmulSupported(w) || in % Info(w).block_elems != 0) return false;
  return t <= kernels::IntegerMatmulMaxRows(w) && (!exact || w == DType::kF16 || w == DType::kBF16);
}

void Matmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t floats)> shared,
            bool exact, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const int64_t t = x.rows(), in = x.cols(), out = w.rows();
  CHECK(w.cols() == in && y.rows() == t && y.cols() == out);
  CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
  if (UseIntegerKernels(exact, w.dtype, t, in)) {
    const Projection p{&w, bias, y};
    QuantMultiMatmul(pool, shared, x, std::span(&p, 1));
    return;
  }
  const float* xp = x.as<const float>();
  float* yp = y.as<float>();
  const auto* wp = w.as<const uint8_t>();
  const uint64_t w_row_bytes = w.row_bytes();
  const int64_t tiles = (out + kTileRows - 1) / kTileRows;

  pool.ParallelFor(tiles, [&](int64_t tile, int thread) {
    const int64_t r0 = tile * kTileRows;
    const int64_t n = std::min(kTileRows, out - r0);
    if (w.dtype == DType::kF32 || IsHalf(w.dtype)) {
      kernels::FloatMatmulRows(w.dtype, wp, w_row_bytes, xp, in, t, in, r0, r0 + n, yp, out);
      return;
    }
    // Any other type (FP8 with its block scales too): widen the tile, then f32.
    float* buf = scratch(thread, uint64_t(n * in));
    DequantizeWeightRows(w, r0, n, buf);
    kernels::FloatMatmulRows(DType::kF32, reinterpret_cast<const uint8_t*>(buf),
                             uint64_t(in) * sizeof(float), xp, in, t, in, 0, n, yp + r0, out);
  });

  AddBias(bias, t, out, yp);
}

void MultiMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                 bool exact, const Tensor& x, std::span<const Projection> projections) {
  const int64_t t = x.rows(), in = x.cols();
  bool integer = true;
  for (const Projection& p : projections) {
    CHECK(p.weight->cols() == in && p.out.rows() == t && p.out.cols() == p.weight->rows());
    CHECK(p.out.dtype == DType::kF32);
    integer &= UseIntegerKernels(exact, p.weight->dtype, t, in);
  }
  CHECK(x.dtype == DType::kF32);
  if (integer && projections.size() > 1) return QuantMultiMatmul(pool, shared, x, projections);
  for (const Projection& p : projections) {
    Matmul(pool, scratch, shared, exact, x, *p.weight, p.bias, p.out);
  }
}

void GroupedMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                   bool exact, const Tensor& x, std::span<const Tensor> weights,
                   std::span<const int32_t> offsets, const Tensor& y) {
  const GroupedProjection p{weights, y};
  MultiGroupedMatmul(pool, scratch, shared, exact, x, std::span(&p, 1), offsets);
}

void MultiGroupedMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                        bool exact, const Tensor& x, std::span<const GroupedProjection> projections,
                        std::span<const int32_t> offsets) {
  constexpr size_t kMaxProjections = 4;
  const int64_t groups = int64_t(offsets.size()) - 1, in = x.cols();
  CHECK(groups >= 0 && !projections.empty() && projections.size() <= kMaxProjections);
  const int64_t out = projections[0].out.cols();
  const DType dtype = groups > 0 ? projections[0].weights[0].dtype : DType::kF32;
  int64_t max_rows = 0;
  bool uniform = true;  // one dtype and one output width: one activation buffer, one tiling
  for (const GroupedProjection& p : projections) {
    CHECK(int64_t(p.weights.size()) == groups && p.out.rows() == x.rows());
    uniform &= p.out.cols() == out;
    for (const Tensor& w : p.weights) uniform &= w.dtype == dtype;
  }
  for (int64_t g = 0; g < groups; ++g) {
    max_rows = std::max<int64_t>(max_rows, offsets[size_t(g) + 1] - offsets[size_t(g)]);
  }
  if (!uniform || !UseIntegerKernels(exact, dtype, max_rows, in)) {  // one matmul per group
    for (const GroupedProjection& p : projections) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
        if (n > 0) {
          Matmul(pool, scratch, shared, exact, x.RowSlice(r0, n), p.weights[size_t(g)], nullptr,
                 p.out.RowSlice(r0, n));
        }
      }
    }
    return;
  }
  // Quantise every group's rows once into its own slice of the shared buffer,
  // then run all (projection, group, row tile) tasks in a single parallel region.
  auto slice_floats = [&](int64_t rows) {
    return (kernels::QuantizedActivationBytes(dtype, rows, in) + 63) / 64 * 16;
  };
  uint64_t total = 0;
  for (int64_t g = 0; g < groups; ++g) total += slice_floats(offsets[size_t(g) + 1] - offsets[size_t(g)]);
  float* buffer = shared(total);
  std::array<int32_t, 1024> active_groups{};
  std::array<uint64_t, 1024> group_offset{};
  CHECK(groups <= 1024);
  int64_t n_active = 0;
  uint64_t offset = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
    if (n == 0) continue;
    active_groups[size_t(n_active)] = int32_t(g);
    group_offset[size_t(n_active)] = offset;
    ++n_active;
    offset += slice_floats(n);
  }
  // The groups' rows quantised on every thread when there are prefill-sized
  // numbers of them (a pp512 step's thousands of rows, serial, left the other
  // threads idle for ~5 % of a MoE run); a decode step's few rows stay on
  // this thread, where another parallel region per layer would cost more.
  auto quantise = [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      const int64_t g = active_groups[size_t(a)];
      const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
      kernels::QuantizeActivations(dtype, x.as<const float>() + r0 * in, n, in,
                                   buffer + group_offset[size_t(a)]);
    }
  };
  constexpr int64_t kParallelRows = 64;
  if (x.rows() < kParallelRows) {
    quantise(0, n_active);
  } else {
    QuantizeInParallel(pool, n_active, in * x.rows() / std::max<int64_t>(1, n_active), quantise);
  }
  const int64_t n_proj = int64_t(projections.size());
  const int64_t tile = TileRows(n_proj * n_active * out, 64, out, pool.num_threads());
  const int64_t tiles_per_group = (out + tile - 1) / tile;
  pool.ParallelFor(n_proj * n_active * tiles_per_group, [&](int64_t task, int) {
    const int64_t p = task / (n_active * tiles_per_group);
    const int64_t a = (task / tiles_per_group) % n_active, tile_index = task % tiles_per_group;
    const int64_t g = active_groups[size_t(a)];
    const int64_t r0 = offsets[size_t(g)], n = offsets[size_t(g) + 1] - r0;
    const Tensor& w = projections[size_t(p)].weights[size_t(g)];
    const int64_t n0 = tile_index * tile, n1 = std::min(out, n0 + tile);
    IntegerRows(w, buffer + group_offset[size_t(a)], n, n0, n1,
                projections[size_t(p)].out.as<float>() + r0 * out, out);
  });
}

MatmulScratchFloats MatmulScratchBound(std::span<const MatmulInput> inputs, int64_t step_tokens) {
  // Whether some step quantises the input of these weights (one row always may).
  const auto quantises = [](const MatmulInput& m) {
    return UseIntegerKernels(/*exact=*/false, m.dtype, 1, m.in);
  };
  MatmulScratchFloats most;
  for (const MatmulInput& m : inputs) {
    if (m.dtype == DType::kF32 || m.in <= 0) continue;
    if (!IsHalf(m.dtype)) most.per_thread = std::max(most.per_thread, uint64_t(kTileRows * m.in));
    if (!quantises(m)) continue;
    // Every form this input is quantised to at once: the same input feeds all
    // the weights of its width (fused q/k/v, gate/up), one buffer each form.
    const int64_t rows = step_tokens * m.rows_per_token;
    bool quantised = false, half = false;
    for (const MatmulInput& o : inputs) {
      if (o.in == m.in && o.rows_per_token == m.rows_per_token && quantises(o)) {
        (IsHalf(o.dtype) ? half : quantised) = true;
      }
    }
    uint64_t bytes = sizeof(float);  // QuantMultiMatmul's one float of slack
    if (quantised) bytes += RoundUp64(kernels::QuantizedActivationBytes(DType::kQ8_0, rows, m.in));
    if (half) bytes += kernels::QuantizedActivationBytes(DType::kF16, rows, m.in);
    // A grouped call's slices: each expert's rows rounded up on their own
    // (QuantizedActivationBytes rounds its 4 parts to 64 bytes, the slice once more).
    if (m.groups > 1) bytes += uint64_t(std::min(m.groups, rows)) * 5 * 64;
    most.shared = std::max(most.shared, (bytes + sizeof(float) - 1) / sizeof(float));
  }
  return most;
}

}  // namespace anymoe::cpu
