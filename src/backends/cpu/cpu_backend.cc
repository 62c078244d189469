#include "backends/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <new>
#include <thread>
#include <utility>

#include "backends/cpu/indexer.h"
#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/convert.h"
#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/float_matmul.h"
#include "backends/cpu/kernels/indexer_int16.h"
#include "backends/cpu/kernels/indexer_scores.h"
#include "backends/cpu/kernels/norm.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/route.h"
#include "backends/cpu/row_ops.h"
#include "backends/host_weight.h"
#include "backends/op_checks.h"
#include "core/mapped_file.h"
#include "core/quantize_row.h"
#include "formats/tensor_source.h"

namespace anymoe {
namespace {

// Floats of a thread's scratch for one block of `block` queries in
// IndexerTopK's prefill path: scores, order, bound, band rows and
// SelectTopKWithBounds' five arrays; the exact kernel's tile; the block's
// quantised queries; one query laid out for the exact kernel.
int64_t IndexerPrefillScratchFloats(int64_t block, int64_t max_keys, int64_t n_heads, int64_t dim) {
  const int64_t tile_keys = kernels::IndexerInt16TileKeys();
  const int64_t padded = (max_keys + tile_keys - 1) / tile_keys * tile_keys;
  return (block + 8) * padded + kernels::IndexerTileFloats(dim) +
         block * n_heads * (kernels::IndexerInt16Pairs(dim) + 1) +
         kernels::IndexerHeadSlots(n_heads) * dim;
}

}  // namespace
namespace {

// Asks the kernel to page out the whole pages of [p, p + bytes). MADV_PAGEOUT
// never changes contents (unlike MADV_DONTNEED on anonymous memory), so it is
// safe whether the bytes are a file mapping or not; failures are ignored, as
// this only returns memory early.
void ReleaseFilePages(const uint8_t* p, uint64_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)p, (void)bytes;
#endif
}

// A matrix the integer kernels can read as panels on this machine.
bool IsPanelCandidate(const Tensor& w) {
  return w.rank >= 2 && kernels::HasPanelKernels(w.dtype) && w.rows() % kernels::kPanelRows == 0;
}

// Buffers of a huge page or more (the KV pool, step activations) are mapped in
// huge pages: a batched decode step streams every sequence's cached rows, and
// with 4 KiB pages one core read them at 18 GB/s against 28 with 2 MiB pages
// (whole rows in order, this VM).
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(uint64_t size) : size_(size) {
    if (size >= cpu::HugePageArena::kHugePage) {
      p_ = cpu::MapHugePages(size);
      mapped_ = p_ != nullptr;
      // Faulted in now, not by the forward passes: a KV pool is otherwise
      // first touched block by block while serving, each fault zeroing a
      // huge page on the step's critical path (4 % of a fresh server's CPU
      // profile under bench-serve), and its memory shows up only then.
      if (mapped_) cpu::PopulatePages(static_cast<uint8_t*>(p_), size);
    }
    if (p_ == nullptr) {
      p_ = ::operator new(std::max<uint64_t>(size, 64), std::align_val_t(64), std::nothrow);
    }
  }
  ~HostBuffer() override {
    if (mapped_) {
      cpu::UnmapHugePages(static_cast<uint8_t*>(p_), size_);
    } else {
      ::operator delete(p_, std::align_val_t(64));
    }
  }
  void* base() override { return p_; }
  uint64_t size() const override { return size_; }

 private:
  void* p_ = nullptr;
  uint64_t size_;
  bool mapped_ = false;
};

}  // namespace

CpuBackend::CpuBackend(int num_threads, bool exact_matmul, bool repack_weights, bool copy_weights,
                       NumaMode numa, NumaPlacement placement)
    : numa_(numa),
      placement_(std::move(placement)),
      pool_(num_threads, placement_.thread_cpus),
      exact_matmul_(exact_matmul),
      repack_weights_(repack_weights && !exact_matmul),  // exact never runs the integer kernels
      copy_weights_(copy_weights),
      scratch_(pool_.num_threads()) {}

DeviceInfo CpuBackend::device() const {
  std::string available;
  for (const kernels::CpuTarget& t : kernels::AvailableCpuTargets()) {
    available += (available.empty() ? "" : ", ") + t.name;
  }
  std::string numa;
  if (numa_ != NumaMode::kNone) numa = ", numa " + placement_.Describe(numa_);
  return DeviceInfo{"cpu: " + std::to_string(pool_.num_threads()) + " threads, SIMD kernels " +
                        kernels::ActiveCpuTarget().name + " (available: " + available + ")" + numa,
                    0, 0, 0, 0};
}

float* CpuBackend::Scratch(int thread, uint64_t floats) {
  auto& s = scratch_[thread];
  if (s.size() < floats) {
    s.reserve(floats);  // exactly: resize alone may double the capacity
    s.resize(floats);
  }
  return s.data();
}

void CpuBackend::ReserveScratch(uint64_t floats) {
  for (int t = 0; t < pool_.num_threads(); ++t) Scratch(t, floats);
}

float* CpuBackend::SharedScratch(uint64_t floats) {
  if (shared_scratch_.size() < floats) {
    shared_scratch_.reserve(floats);  // exactly: resize alone may double the capacity
    shared_scratch_.resize(floats);
  }
  return shared_scratch_.data();
}

CpuBackend::ContextFloats CpuBackend::ContextScratch(const ContextShape& shape) const {
  ContextFloats most = IndexerScratch(shape.max_keys, shape.indexer);
  for (const AttentionShape& a : shape.attention) {
    const ContextFloats f = AttentionScratch(shape.max_keys, shape.step_tokens, a);
    most.per_thread = std::max(most.per_thread, f.per_thread);
    most.partials = std::max(most.partials, f.partials);
  }
  // The ops use the scratch one after another: each buffer holds the largest.
  most.per_thread = std::max(
      most.per_thread, LatentScratch(shape.max_keys, shape.step_tokens, shape.latent).per_thread);
  const cpu::MatmulScratchFloats m = cpu::MatmulScratchBound(shape.matmuls, shape.step_tokens);
  most.shared = std::max(most.shared, m.shared);
  most.per_thread = std::max(most.per_thread, m.per_thread);
  return most;
}

CpuBackend::ContextFloats CpuBackend::IndexerScratch(int64_t max_keys, IndexerShape indexer) const {
  // The DSA indexer's scratch grows with the context (IndexerTopK): a decode
  // step's scores in the shared scratch and its picks in a thread's; a
  // prefill's keys quantised to int16 in the shared scratch and each block's
  // scores, order, tile and bounds in its thread's. Both paths, whichever the
  // target and --int16-indexer pick, so the figure does not depend on them.
  if (indexer.heads == 0) return {};
  const int64_t tile_keys = kernels::IndexerInt16TileKeys();
  const int64_t padded = (max_keys + tile_keys - 1) / tile_keys * tile_keys;
  const int64_t key_floats = (kernels::IndexerInt16KeyElements(max_keys, indexer.dim) + 1) / 2;
  const int64_t decode_thread =
      std::max(kernels::IndexerHeadSlots(indexer.heads) * indexer.dim, max_keys);
  const int64_t prefill_thread = std::max(
      IndexerPrefillScratchFloats(kIndexerQueryBlock, max_keys, indexer.heads, indexer.dim),
      (kIndexerQueryBlock + 1) * padded + kernels::IndexerTileFloats(indexer.dim));
  return {uint64_t(std::max(kIndexerFewQueries * max_keys, key_floats + 2 * padded)),
          uint64_t(std::max(decode_thread, prefill_thread)), 0};
}

// Capacity only: a page becomes resident when an op first writes it, so a
// context that never grows long never holds the long context's scratch, and
// no op reallocates mid-step (the plan counts the capacity).
Status CpuBackend::ReserveForContext(const ContextShape& shape) {
  const ContextFloats need = ContextScratch(shape);
  shared_scratch_.reserve(need.shared);
  for (std::vector<float>& s : scratch_) s.reserve(need.per_thread);
  attention_partials_.reserve(need.partials);
  return Status::Ok();
}

uint64_t CpuBackend::ContextScratchBytes(const ContextShape& shape) const {
  const ContextFloats need = ContextScratch(shape);
  return (need.shared + need.partials + uint64_t(pool_.num_threads()) * need.per_thread) *
         sizeof(float);
}

uint64_t CpuBackend::scratch_bytes() const {
  uint64_t floats = shared_scratch_.capacity() + attention_partials_.capacity();
  for (const std::vector<float>& s : scratch_) floats += s.capacity();
  return floats * sizeof(float);
}

Expected<std::unique_ptr<Buffer>> CpuBackend::Allocate(uint64_t bytes, const std::string& what) {
  auto buffer = std::make_unique<HostBuffer>(bytes);
  if (buffer->base() == nullptr) {
    return Status::Error("cpu: cannot allocate " + std::to_string(bytes) + " bytes for " + what);
  }
  return std::unique_ptr<Buffer>(std::move(buffer));
}

Expected<Tensor> CpuBackend::PrepareWeight(const TensorInfo& info) {
  ASSIGN_OR_RETURN(HostWeight w, PrepareHostWeight(info));
  if (!w.was_converted()) {  // a view into the mmap
    if (repack_weights_ && IsPanelCandidate(w.tensor)) {
      RETURN_IF_ERROR(StorePanels(info.name, w.tensor));
      return w.tensor;
    }
    if (!copy_weights_) {  // used in place: read it now, not in the first steps
      if (populate_weights_)
        PopulateMappedRange(static_cast<const uint8_t*>(w.tensor.base), w.bytes);
      return w.tensor;
    }
    ASSIGN_OR_RETURN(uint8_t* copy, panels_.Allocate(w.bytes, info.name));
    std::memcpy(copy, w.tensor.base, w.bytes);
    ReleaseFilePages(static_cast<const uint8_t*>(w.tensor.base), w.bytes);
    w.tensor.base = copy;
    return w.tensor;
  }
  // The few small vectors of a bf16/f16 checkpoint, converted once, kept here.
  ASSIGN_OR_RETURN(auto buf, Allocate(w.bytes, info.name));
  std::memcpy(buf->base(), w.tensor.base, w.bytes);
  w.tensor.base = buf->base();
  owned_.push_back(std::move(buf));
  return w.tensor;
}

Status CpuBackend::StorePanels(const std::string& name, Tensor& w) {
  const uint64_t bytes = w.rows() * w.row_bytes();
  ASSIGN_OR_RETURN(uint8_t* panels, panels_.Allocate(bytes, name + " (panel layout)"));
  const auto* file = w.as<const uint8_t>();
  // Groups of 8 rows are independent: split them over the pool.
  const int64_t groups = w.rows() / kernels::kPanelRows;
  const int64_t per_task = std::max<int64_t>(1, groups / (8 * pool_.num_threads()));
  const uint64_t group_bytes = kernels::kPanelRows * w.row_bytes();
  // The matmuls read only the panels: the kernel may reclaim the file's pages
  // (clean, so never lost: a later read, e.g. an embedding row of a tied
  // output head, faults them back in), task by task, so that a large tensor
  // is never held twice (the pages each task read, then its panels).
  // Each task reads its rows in one request first (faulting them in page by
  // page from a cold cache took 3x longer).
  pool_.ParallelFor((groups + per_task - 1) / per_task, [&](int64_t task, int) {
    const int64_t g0 = task * per_task, n = std::min(per_task, groups - g0);
    const uint8_t* rows = file + g0 * group_bytes;
    PopulateMappedRange(rows, uint64_t(n) * group_bytes);
    kernels::PackPanels(w.dtype, rows, n * kernels::kPanelRows, w.cols(),
                        panels + g0 * group_bytes);
    ReleaseFilePages(rows, uint64_t(n) * group_bytes);
  });
  ReleaseFilePages(file, bytes);  // the pages the tasks' edges shared
  w.panels = panels;
  return Status::Ok();
}

void CpuBackend::Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const int64_t h = table.cols();
  CHECK(out.cols() == h && out.rows() == int64_t(ids.size()));
  const uint64_t row_bytes = table.row_bytes();
  // A table stored as panels is read there: the file's pages were released.
  // (Block-scaled tables are never packed.)
  const auto* panels = static_cast<const uint8_t*>(table.panels);
  if (table.offset % (kernels::kPanelRows * row_bytes) != 0) panels = nullptr;
  uint8_t* row = panels ? reinterpret_cast<uint8_t*>(Scratch(0, row_bytes / 4 + 1)) : nullptr;
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(ids[i] >= 0 && ids[i] < table.rows());
    if (panels == nullptr) {
      DequantizeWeightRows(table, ids[i], 1, out.as<float>() + i * h);
      continue;
    }
    CHECK(!table.scales);
    kernels::UnpackPanelRow(table.dtype, panels + table.offset, ids[i], h, row);
    DequantizeRow(table.dtype, row, out.as<float>() + i * h, h);
  }
}

// The row ops of a batched decode step (8 rows) or a prefill left the pool's
// other threads idle: serially they were ~8 % of a concurrency-8 serving
// profile. Below kParallelElements a region costs about what it saves
// (kernel_bench: SiLU-gated product 0.43 ns per element on one thread).
void CpuBackend::ForRows(int64_t rows, int64_t elements_per_row,
                         FunctionRef<void(int64_t, int64_t)> fn) {
  constexpr int64_t kParallelElements = 8192;
  if (rows < 2 || rows * elements_per_row < kParallelElements) return fn(0, rows);
  pool_.ParallelRange(rows, 1, [&](int64_t r0, int64_t r1, int) { fn(r0, r1); });
}

void CpuBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && weight.elements() == n && out.elements() == x.elements());
  const float* xp = x.as<const float>();
  const float* w = weight.as<const float>();
  float* op = out.as<float>();
  ForRows(x.rows(), n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels::RmsNormRow(xp + r * n, w, eps, n, op + r * n);
  });
}

void CpuBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  const Projection p{&w, bias, y};
  MultiMatmul(x, std::span(&p, 1));
}

void CpuBackend::MultiMatmul(const Tensor& x, std::span<const Projection> projections) {
  cpu::MultiMatmul(
      pool_, [this](int thread, uint64_t n) { return Scratch(thread, n); },
      [this](uint64_t n) { return SharedScratch(n); }, exact_matmul_, x, projections);
}

void CpuBackend::GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                               std::span<const int32_t> offsets, const Tensor& y) {
  cpu::GroupedMatmul(
      pool_, [this](int thread, uint64_t n) { return Scratch(thread, n); },
      [this](uint64_t n) { return SharedScratch(n); }, exact_matmul_, x, weights, offsets, y);
}

void CpuBackend::MultiGroupedMatmul(const Tensor& x,
                                    std::span<const GroupedProjection> projections,
                                    std::span<const int32_t> offsets) {
  cpu::MultiGroupedMatmul(
      pool_, [this](int thread, uint64_t n) { return Scratch(thread, n); },
      [this](uint64_t n) { return SharedScratch(n); }, exact_matmul_, x, projections, offsets);
}

void CpuBackend::UpdateRopeAngles(std::span<const int32_t> positions, const RopeTable& rope) {
  const size_t half = size_t(rope.rotary_dims / 2);
  CHECK(rope.inv_freq.size() >= half);
  const auto freqs = rope.inv_freq.first(half);
  auto equal = [](auto a, const auto& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  };
  const bool same = rope_factor_ == rope.attention_factor && equal(freqs, rope_freqs_) &&
                    equal(positions, rope_positions_);
  if (same) return;
  rope_positions_.assign(positions.begin(), positions.end());
  rope_freqs_.assign(freqs.begin(), freqs.end());
  rope_factor_ = rope.attention_factor;
  rope_cos_.resize(positions.size() * half);
  rope_sin_.resize(positions.size() * half);
  for (size_t t = 0; t < positions.size(); ++t) {
    cpu::RopeAngles(positions[t], rope, rope_cos_.data() + t * half, rope_sin_.data() + t * half);
  }
}

void CpuBackend::Rope(const Tensor& x, std::span<const int32_t> positions,
                      const RopeTable& rope) {
  CHECK(x.rank == 3 && x.dim(0) == int64_t(positions.size()));
  const int64_t heads = x.dim(1), head_dim = x.dim(2), half = rope.rotary_dims / 2;
  UpdateRopeAngles(positions, rope);
  float* xp = x.as<float>();
  ForRows(x.dim(0), heads * head_dim, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      cpu::RopeRotate(xp + t * heads * head_dim, heads, head_dim, rope,
                      rope_cos_.data() + t * half, rope_sin_.data() + t * half);
    }
  });
}

void CpuBackend::Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                           std::span<const int32_t> key_rows, int64_t n_past, float scale,
                           const Tensor& out) {
  const AttentionJob job{q, &k_pool, &v_pool, key_rows, n_past, out};
  MultiAttention(std::span(&job, 1), scale);
}

namespace {

// The heads [kvh, kvh + heads) of token ti of job j: where its queries,
// outputs and key range are. The cache holds f32, f16, q8_0 or q4_0 keys and
// values.
struct TokenHeads {
  const float* q;
  const Tensor* k_pool;
  const Tensor* v_pool;
  int64_t k0, v0;  // the first kv head's offset in a row, in values
  float* out;
  int64_t heads, group, n_keys, k_stride, v_stride, d_k, d_v;
  const int32_t* key_rows;

  TokenHeads(const AttentionJob& j, int64_t ti, int64_t kvh, int64_t heads_) : heads(heads_) {
    const int64_t n_h = j.q.dim(1), n_kv = j.k_pool->dim(1);
    d_k = j.q.dim(2);
    d_v = j.v_pool->dim(2);
    group = n_h / n_kv;
    const int64_t h0 = ti * n_h + kvh * group;  // first query head
    q = j.q.as<const float>() + h0 * d_k;
    out = j.out.as<float>() + h0 * d_v;
    k_pool = j.k_pool;
    v_pool = j.v_pool;
    k0 = kvh * d_k;
    v0 = kvh * d_v;
    n_keys = j.n_past + ti + 1;
    key_rows = j.key_rows.data();
    k_stride = n_kv * d_k;
    v_stride = n_kv * d_v;
  }

  void Attend(float scale) const {
    if (IsRowQuantizable(k_pool->dtype)) {
      return kernels::AttendOnlineSoftmaxHeads(
          q, heads, group, d_k, k_pool->dtype, QuantizedRows(*k_pool, k0),
          QuantizedRows(*v_pool, v0), n_keys, key_rows, RowBytes(*k_pool, k_stride),
          RowBytes(*v_pool, v_stride), d_k, d_v, scale, out, d_v);
    }
    WithRows([&](auto k, auto v) {
      kernels::AttendOnlineSoftmaxHeads(q, heads, group, d_k, k, v, n_keys, key_rows, k_stride,
                                        v_stride, d_k, d_v, scale, out, d_v);
    });
  }
  // Tokens ti .. ti + n - 1 (n_h query heads each), every kv head, as tiles.
  void AttendTokens(int64_t n, int64_t n_h, float scale, float* scratch) const {
    const bool quantized = IsRowQuantizable(k_pool->dtype);
    kernels::AttendTokens(q, n_h * d_k, n, n_keys, heads, group, k_pool->dtype,
                          k_pool->as<const uint8_t>(), v_pool->as<const uint8_t>(), key_rows,
                          quantized ? RowBytes(*k_pool, k_stride) : k_stride,
                          quantized ? RowBytes(*v_pool, v_stride) : v_stride, d_k, d_v, scale,
                          kernels::kAttentionSegmentKeys, out, n_h * d_v, scratch);
  }
  void Segment(int64_t s, float scale, float* part, float* maxes, float* denoms) const {
    if (IsRowQuantizable(k_pool->dtype)) {
      return kernels::AttendSegment(q, heads, group, d_k, k_pool->dtype,
                                    QuantizedRows(*k_pool, k0), QuantizedRows(*v_pool, v0),
                                    n_keys, key_rows, s, RowBytes(*k_pool, k_stride),
                                    RowBytes(*v_pool, v_stride), d_k, d_v, scale, part, maxes,
                                    denoms);
    }
    WithRows([&](auto k, auto v) {
      kernels::AttendSegment(q, heads, group, d_k, k, v, n_keys, key_rows, s, k_stride, v_stride,
                             d_k, d_v, scale, part, maxes, denoms);
    });
  }

 private:
  // A q8_0 / q4_0 cache: row 0's blocks from `values` in (whole blocks), and
  // the bytes of `values` values.
  static const uint8_t* QuantizedRows(const Tensor& pool, int64_t values) {
    return pool.as<const uint8_t>() + RowBytes(pool, values);
  }
  static int64_t RowBytes(const Tensor& pool, int64_t values) {
    return int64_t(BytesFor(pool.dtype, uint64_t(values)).value());
  }

  // f(k, v) with the first kv head's keys and values typed as stored: f32, or
  // f16 bits.
  template <class F>
  void WithRows(const F& f) const {
    if (k_pool->dtype == DType::kF16) {
      return f(k_pool->as<const uint16_t>() + k0, v_pool->as<const uint16_t>() + v0);
    }
    f(k_pool->as<const float>() + k0, v_pool->as<const float>() + v0);
  }
};

// Where the partial results of `segments` segments of a token's n_q queries
// lie in a buffer of Floats(): per segment the n_q unnormalised outputs, then
// per segment the n_q maxes, then the n_q denominators (MergeSegments' layout).
struct SegmentPartials {
  float* parts;
  float* maxes;
  float* denoms;

  SegmentPartials(float* base, int64_t segments, int64_t n_q, int64_t d_v)
      : parts(base), maxes(base + segments * n_q * d_v), denoms(maxes + segments * n_q) {}
  static int64_t Floats(int64_t segments, int64_t n_q, int64_t d_v) {
    return segments * n_q * (d_v + 2);
  }
};

constexpr size_t kMaxAttentionJobs = 64;  // per parallel region
// Steps of more tokens than this (or of 4+ per thread) have a task per token.
constexpr int64_t kMaxFewTokens = 256;

}  // namespace

// A token's keys come in segments of kernels::kAttentionSegmentKeys (one for
// up to 512 keys), attended separately and merged whatever the batch. With 4+
// tokens per thread each task is a token: every head and every segment in
// turn, its rows read whole, front to back, which this machine's memory
// streams ~1.6x faster than a head's slice of every row (kernel_bench
// BM_AttendDecodeToken). With fewer tokens (decoding 1-3 sequences) a task is
// one segment of a token, over every head when the token has a segment per
// thread or more, else over one kv head: a long context splits over the
// threads by keys, a short one by heads.
void CpuBackend::MultiAttention(std::span<const AttentionJob> jobs, float scale) {
  for (; jobs.size() > kMaxAttentionJobs; jobs = jobs.subspan(kMaxAttentionJobs)) {
    MultiAttention(jobs.first(kMaxAttentionJobs), scale);
  }
  int64_t tokens = 0;
  for (const AttentionJob& j : jobs) {
    CHECK(j.q.rank == 3 && j.k_pool->rank == 3 && j.v_pool->rank == 3 && j.out.rank == 3);
    CHECK((j.k_pool->dtype == DType::kF32 || j.k_pool->dtype == DType::kF16 ||
           IsRowQuantizable(j.k_pool->dtype)) &&
          j.v_pool->dtype == j.k_pool->dtype);
    const int64_t t = j.q.dim(0), n_h = j.q.dim(1), n_kv = j.k_pool->dim(1);
    CHECK(j.k_pool->dim(2) == j.q.dim(2) && n_h % n_kv == 0 &&
          j.n_past + t <= int64_t(j.key_rows.size()));
    tokens += t;
  }
  if (tokens >= 4 * pool_.num_threads() || tokens > kMaxFewTokens) {
    return AttendPerToken(jobs, scale);
  }

  // Few tokens: tasks of (token, segment, head split), partial results of
  // multi-segment tokens in attention_partials_, merged after the region.
  struct Token {
    size_t job;
    int64_t ti, segments, head_splits, first_task, partials;
  };
  std::array<Token, kMaxFewTokens> toks;
  size_t n_toks = 0;
  int64_t n_tasks = 0, n_partials = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const AttentionJob& j = jobs[i];
    const int64_t n_h = j.q.dim(1), n_kv = j.k_pool->dim(1), d_v = j.v_pool->dim(2);
    for (int64_t ti = 0; ti < j.q.dim(0); ++ti) {
      const int64_t segments = kernels::AttentionSegments(j.n_past + ti + 1);
      const int64_t splits = segments >= pool_.num_threads() ? 1 : n_kv;
      toks[n_toks++] = {i, ti, segments, splits, n_tasks, n_partials};
      n_tasks += segments * splits;
      if (segments > 1) n_partials += SegmentPartials::Floats(segments, n_h, d_v);
    }
  }
  if (attention_partials_.size() < size_t(n_partials)) {
    attention_partials_.resize(size_t(n_partials));
  }
  pool_.ParallelFor(n_tasks, [&](int64_t task, int) {
    size_t t = 0;
    while (t + 1 < n_toks && task >= toks[t + 1].first_task) ++t;
    const Token& tok = toks[t];
    const AttentionJob& j = jobs[tok.job];
    const int64_t local = task - tok.first_task, n_kv = j.k_pool->dim(1);
    const int64_t s = local / tok.head_splits, split = local % tok.head_splits;
    const int64_t heads = n_kv / tok.head_splits, kvh = split * heads;
    const TokenHeads th(j, tok.ti, kvh, heads);
    if (tok.segments == 1) return th.Attend(scale);
    const int64_t n_h = j.q.dim(1), q0 = s * n_h + kvh * th.group;  // this task's first query
    const SegmentPartials p(attention_partials_.data() + tok.partials, tok.segments, n_h, th.d_v);
    th.Segment(s, scale, p.parts + q0 * th.d_v, p.maxes + q0, p.denoms + q0);
  });
  for (size_t t = 0; t < n_toks; ++t) {
    const Token& tok = toks[t];
    if (tok.segments == 1) continue;
    const AttentionJob& j = jobs[tok.job];
    const int64_t n_h = j.q.dim(1), d_v = j.v_pool->dim(2);
    const SegmentPartials p(attention_partials_.data() + tok.partials, tok.segments, n_h, d_v);
    kernels::MergeSegments(p.parts, n_h * d_v, p.maxes, p.denoms, tok.segments, n_h, d_v,
                           j.out.as<float>() + tok.ti * n_h * d_v, d_v);
  }
}

namespace {

// Tokens per prefill tile (kernels::AttendTokens): up to 16, fewer when the
// outputs the tile accumulates over each block of keys would pass 256 KiB
// (half of this machine's L2; GLM-5's MLA: 64 heads x 512 latent values, 2
// tokens) or its tokens' segment partials (`segments` per token) 16 MiB, and
// fewer when the tiles would not give every thread 4 tasks.
int64_t TileTokens(int64_t tokens, int64_t threads, int64_t n_h, int64_t d_v,
                   int64_t segments = 1) {
  const int64_t width = std::max<int64_t>(n_h * d_v, 1);
  int64_t fit = (int64_t(64) << 10) / width;
  if (segments > 1) fit = std::min(fit, (int64_t(4) << 20) / (segments * (width + 2 * n_h)));
  return std::clamp<int64_t>(std::min(fit, tokens / (4 * threads)), 1, 16);
}

}  // namespace

// The most MultiAttention's scratch holds for sequences of up to max_keys
// keys and steps of up to step_tokens tokens: a step of 4+ tokens per thread
// gives each thread a tile (AttendPerToken), whose segment partials grow with
// the keys until TileTokens shrinks the tile; the tile of a step is sized for
// its longest sequence, so the bound is the largest over segment counts of
// the tile for that count at the most keys it allows. A smaller step keeps
// every token's partials (attention_partials_).
CpuBackend::ContextFloats CpuBackend::AttentionScratch(int64_t max_keys, int64_t step_tokens,
                                                       const AttentionShape& a) const {
  ContextFloats f;
  if (a.q_heads <= 0 || a.kv_heads <= 0 || max_keys <= 0 || step_tokens <= 0) return f;
  const int64_t threads = pool_.num_threads(), group = a.q_heads / a.kv_heads;
  const int64_t max_segments = kernels::AttentionSegments(max_keys);
  if (step_tokens >= 4 * threads || step_tokens > kMaxFewTokens) {
    for (int64_t s = 1; s <= max_segments; ++s) {
      const int64_t keys = std::min(s * kernels::kAttentionSegmentKeys, max_keys);
      const int64_t tile = TileTokens(step_tokens, threads, a.q_heads, a.d_v, s);
      f.per_thread =
          std::max(f.per_thread, uint64_t(kernels::AttendTokensScratch(
                                     tile, std::max<int64_t>(1, keys - tile + 1), a.kv_heads, group,
                                     a.d_k, a.d_v, kernels::kAttentionSegmentKeys)));
    }
  }
  const int64_t few = std::min({4 * threads - 1, kMaxFewTokens, step_tokens});
  if (max_segments > 1) {
    f.partials = uint64_t(few * SegmentPartials::Floats(max_segments, a.q_heads, a.d_v));
  }
  return f;
}

// The most LatentAttention's per-thread scratch holds for sequences of up to
// max_keys keys and steps of up to step_tokens tokens: a dense prefill's tile
// (TileTokens grows with the step's tokens), or one token's group of heads
// after the DSA selection's mapped rows (a row id per key). The tile scratch
// grows with the tokens and heads it holds, so the largest tile and the
// whole group of heads bound every call.
CpuBackend::ContextFloats CpuBackend::LatentScratch(int64_t max_keys, int64_t step_tokens,
                                                    const LatentShape& l) const {
  ContextFloats f;
  if (l.heads <= 0 || max_keys <= 0 || step_tokens <= 0) return f;
  const int64_t threads = pool_.num_threads();
  if (step_tokens >= 4 * threads) {
    const int64_t tile = TileTokens(step_tokens, threads, l.heads, l.latent_dim);
    f.per_thread =
        uint64_t(kernels::AttendTokensScratch(tile, max_keys, 1, l.heads, l.d, l.latent_dim, 0));
  }
  const uint64_t ids = uint64_t((max_keys + 15) / 16 * 16);
  f.per_thread = std::max(f.per_thread, ids + uint64_t(kernels::AttendTokensScratch(
                                                  1, max_keys, 1, l.heads, l.d, l.latent_dim, 0)));
  return f;
}

void CpuBackend::AttendPerToken(std::span<const AttentionJob> jobs, float scale) {
  // A task is a tile of consecutive tokens of one job: each block of keys
  // gathered once for all of their queries.
  int64_t tokens = 0, widest = 0, heads = 1, keys = 1;
  for (const AttentionJob& j : jobs) {
    tokens += j.q.dim(0);
    widest = std::max(widest, j.q.dim(1) * j.v_pool->dim(2));
    heads = std::max(heads, j.q.dim(1));
    keys = std::max(keys, j.n_past + j.q.dim(0));
  }
  const int64_t tile = TileTokens(tokens, pool_.num_threads(), heads, widest / heads,
                                  kernels::AttentionSegments(keys));
  std::array<int64_t, kMaxAttentionJobs + 1> first_task{};
  for (size_t i = 0; i < jobs.size(); ++i) {
    first_task[i + 1] = first_task[i] + (jobs[i].q.dim(0) + tile - 1) / tile;
  }
  // Every thread's scratch fits the biggest task before any task runs.
  uint64_t most = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    for (int64_t t0 = 0; t0 < jobs[i].q.dim(0); t0 += tile) {
      const TokenHeads th(jobs[i], t0, 0, jobs[i].k_pool->dim(1));
      const int64_t n = std::min(tile, jobs[i].q.dim(0) - t0);
      most = std::max(most, uint64_t(kernels::AttendTokensScratch(
                                n, th.n_keys, th.heads, th.group, th.d_k, th.d_v,
                                kernels::kAttentionSegmentKeys)));
    }
  }
  ReserveScratch(most);
  pool_.ParallelFor(first_task[jobs.size()], [&](int64_t task, int thread) {
    size_t i = 0;
    while (task >= first_task[i + 1]) ++i;
    const AttentionJob& j = jobs[i];
    const int64_t t0 = (task - first_task[i]) * tile, n = std::min(tile, j.q.dim(0) - t0);
    const TokenHeads th(j, t0, 0, j.k_pool->dim(1));
    th.AttendTokens(n, j.q.dim(1), scale, Scratch(thread, most));
  });
}

void CpuBackend::LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                                 std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                 const KeySelection* selection, const Tensor& out) {
  CHECK(q.rank == 3 && pool.rank == 2 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d = q.dim(2);
  CHECK(pool.cols() == d && out.dim(2) == latent_dim && n_past + t <= int64_t(key_rows.size()));
  const float* qp = q.as<const float>();
  const float* cp = pool.as<const float>();
  float* op = out.as<float>();
  if (selection == nullptr && t >= 4 * pool_.num_threads()) {
    // Prefill, dense: tiles of consecutive tokens (kernels::AttendTokens), each
    // block of latent rows gathered once for all their heads; the latent is
    // both the key and (its first latent_dim values) the value.
    const int64_t tile = TileTokens(t, pool_.num_threads(), n_h, latent_dim);
    pool_.ParallelFor((t + tile - 1) / tile, [&](int64_t task, int thread) {
      const int64_t t0 = task * tile, n = std::min(tile, t - t0);
      const int64_t floats = kernels::AttendTokensScratch(n, n_past + t0 + 1, 1, n_h, d,
                                                          latent_dim, 0);
      kernels::AttendTokens(qp + t0 * n_h * d, n_h * d, n, n_past + t0 + 1, 1, n_h, DType::kF32,
                            cp, cp, key_rows.data(), d, d, d, latent_dim, scale, 0,
                            op + t0 * n_h * latent_dim, n_h * latent_dim,
                            Scratch(thread, uint64_t(floats)));
    });
    return;
  }
  // Otherwise (decode, DSA's per-token selections) a task is one token's heads,
  // or a group of them when there are too few tokens to keep the threads busy:
  // the heads of a task share each read of the latent rows (a query's bits do
  // not depend on its group).
  int64_t groups = 1;
  while (t * groups < 4 * pool_.num_threads() && groups < n_h) groups *= 2;
  const int64_t group = (n_h + groups - 1) / groups;
  groups = (n_h + group - 1) / group;
  auto keys_of = [&](int64_t ti) {
    return selection != nullptr ? int64_t(selection->counts[size_t(ti)]) : n_past + ti + 1;
  };
  // The heads as one tile over the keys; with a selection its pool rows
  // (mapped from positions) lie in the scratch ahead of the tile's.
  auto ids_of = [&](int64_t n_keys) {
    return selection != nullptr ? (n_keys + 15) / 16 * 16 : 0;
  };
  // Every thread's scratch fits the biggest task (a full group of heads over
  // the most keys) before any task runs.
  uint64_t most = 0;
  for (int64_t ti = 0; ti < t; ++ti) {
    const int64_t n_keys = keys_of(ti);
    most = std::max(most, uint64_t(ids_of(n_keys) + kernels::AttendTokensScratch(
                                                         1, n_keys, 1, group, d, latent_dim, 0)));
  }
  ReserveScratch(most);
  pool_.ParallelFor(t * groups, [&](int64_t task, int thread) {
    const int64_t ti = task / groups, h0 = task % groups * group, heads = std::min(group, n_h - h0);
    const int64_t n_keys = keys_of(ti), ids = ids_of(n_keys);
    float* scratch = Scratch(thread, most);
    const int32_t* rows = key_rows.data();
    if (selection != nullptr) {
      const int32_t* positions = selection->keys.data() + ti * selection->stride;
      int32_t* mapped = reinterpret_cast<int32_t*>(scratch);
      for (int64_t j = 0; j < n_keys; ++j) mapped[j] = key_rows[size_t(positions[j])];
      rows = mapped;
    }
    // The latent is both the key (with the rope part) and the value (without it).
    kernels::AttendTokens(qp + (ti * n_h + h0) * d, n_h * d, 1, n_keys, 1, heads, DType::kF32, cp,
                          cp, rows, d, d, d, latent_dim, scale, 0,
                          op + (ti * n_h + h0) * latent_dim, n_h * latent_dim, scratch + ids);
  });
}

void CpuBackend::HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                            int64_t y_stride) {
  const int64_t t = CheckHeadMatmul(x, x_stride, w, y, y_stride);
  const int64_t n_h = w.dim(0), d_out = w.dim(1), d_in = w.dim(2);
  const float* xp = x.as<const float>();
  const float* wp = w.as<const float>();
  float* yp = y.as<float>();
  pool_.ParallelFor(n_h, [&](int64_t h, int) {
    // [T, d_in] (row stride n_h * x_stride) x W[h]^T -> [T, d_out] (row stride n_h * y_stride)
    kernels::FloatMatmulRows(DType::kF32, reinterpret_cast<const uint8_t*>(wp + h * d_out * d_in),
                             uint64_t(d_in) * sizeof(float), xp + h * x_stride, n_h * x_stride, t,
                             d_in, 0, d_out, yp + h * y_stride, n_h * y_stride);
  });
}

void CpuBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                             int64_t dst_col, int64_t n) {
  CHECK(src.rows() == dst.rows() && src_col + n <= src.cols() && dst_col + n <= dst.cols());
  for (int64_t r = 0; r < src.rows(); ++r) {
    std::memcpy(dst.as<float>() + r * dst.cols() + dst_col,
                src.as<const float>() + r * src.cols() + src_col, size_t(n) * sizeof(float));
  }
}

bool CpuBackend::UseInt16Indexer() const {
  switch (int16_indexer_) {
    case Int16Indexer::kOn:
      return true;
    case Int16Indexer::kOff:
      return false;
    case Int16Indexer::kAuto:
      break;
  }
  return kernels::IndexerInt16Pays();
}

// A step of at most kIndexerFewQueries queries (decode, verify) scores each
// query alone, its keys in runs of kIndexerRunKeys spread over the threads,
// scores in shared scratch; a longer one (prefill) gives each task
// kIndexerQueryBlock queries, scored together one tile of keys at a time.
// With the int16 indexer (UseInt16Indexer; by default where the target makes it pay), prefill
// scores in int16 first (kernels/indexer_int16.h: every key quantised once per call, into the
// shared scratch), each score with a bound on its error, and only the keys the bounds leave
// undecided near a query's top-k threshold are scored exactly (cpu::SelectTopKWithBounds); values
// outside the bounds' range make the call, or the block, score exactly. The selection is the exact
// scores' either way, and an exact score has the same bits in every path
// (kernels/indexer_scores.h).
void CpuBackend::IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                             std::span<const int32_t> key_rows, int64_t n_past, float scale,
                             int64_t topk, std::span<int32_t> selection,
                             std::span<int32_t> counts) {
  CheckIndexerTopK(q, pool, head_weights, key_rows, n_past, topk, selection, counts);
  const int64_t t = q.dim(0), n_heads = q.dim(1), dim = q.dim(2);
  const float* qp = q.as<const float>();
  const float* kp = pool.as<const float>();
  const float* wp = head_weights.as<const float>();
  const int64_t max_keys = n_past + t;
  auto select = [&](int64_t ti, const float* scores, int32_t* order) {
    counts[size_t(ti)] = int32_t(cpu::SelectTopK(scores, n_past + ti + 1, topk, order,
                                                 selection.data() + ti * topk));
  };
  if (t <= kIndexerFewQueries) {
    const int64_t runs = (max_keys + kIndexerRunKeys - 1) / kIndexerRunKeys;
    const int64_t q_floats = kernels::IndexerHeadSlots(n_heads) * dim;
    float* scores = SharedScratch(uint64_t(t * max_keys));
    pool_.ParallelFor(t * runs, [&](int64_t task, int thread) {
      const int64_t ti = task / runs, u0 = (task % runs) * kIndexerRunKeys;
      const int64_t n_keys = n_past + ti + 1;  // causal
      if (n_keys <= topk || u0 >= n_keys) return;  // every key survives: no scores needed
      float* q_t = Scratch(thread, uint64_t(q_floats));
      kernels::IndexerQueryLayout(qp + ti * n_heads * dim, n_heads, dim, q_t);
      kernels::IndexerScores(q_t, wp + ti * n_heads, n_heads, dim, kp, key_rows.data(), u0,
                             std::min(u0 + kIndexerRunKeys, n_keys), scale,
                             scores + ti * max_keys + u0);
    });
    pool_.ParallelFor(t, [&](int64_t ti, int thread) {
      select(ti, scores + ti * max_keys, reinterpret_cast<int32_t*>(Scratch(thread, max_keys)));
    });
    return;
  }
  constexpr int64_t kBlock = kIndexerQueryBlock;
  const int64_t tile_keys = kernels::IndexerInt16TileKeys();
  const int64_t padded = (max_keys + tile_keys - 1) / tile_keys * tile_keys;
  const int64_t n_pairs = kernels::IndexerInt16Pairs(dim);
  const int64_t slots = kernels::IndexerHeadSlots(n_heads);
  const int64_t tile_floats = kernels::IndexerTileFloats(dim);

  // Every key quantised once, in parallel runs of whole tiles.
  bool approximate = max_keys > topk && UseInt16Indexer();
  kernels::IndexerKeyQuant keys_q;
  if (approximate) {
    const int64_t key_floats = (kernels::IndexerInt16KeyElements(max_keys, dim) + 1) / 2;
    float* shared = SharedScratch(uint64_t(key_floats + 2 * padded));
    keys_q = {reinterpret_cast<int16_t*>(shared), shared + key_floats,
              shared + key_floats + padded};
    const int64_t run = 64 * tile_keys;
    std::atomic<bool> tame{true};
    pool_.ParallelFor((max_keys + run - 1) / run, [&](int64_t r, int) {
      const int64_t u0 = r * run, u1 = std::min(max_keys, u0 + run);
      if (!kernels::QuantizeIndexerKeys(kp, key_rows.data(), dim, u0, u1, u1 == max_keys, keys_q)) {
        tame = false;
      }
    });
    approximate = tame;
  }

  pool_.ParallelFor((t + kBlock - 1) / kBlock, [&](int64_t block, int thread) {
    const int64_t t0 = block * kBlock, nq = std::min(kBlock, t - t0);
    // The exact path needs only the scores, the order and the tile.
    const int64_t floats = approximate
                               ? IndexerPrefillScratchFloats(kBlock, max_keys, n_heads, dim)
                               : (kBlock + 1) * padded + tile_floats;
    float* next = Scratch(thread, uint64_t(floats));
    auto take = [&next](int64_t floats) { return std::exchange(next, next + floats); };
    float* scores = take(kBlock * padded);  // [kBlock, padded]
    auto* order = reinterpret_cast<int32_t*>(take(padded));
    float* tile = take(tile_floats);
    // Keys past a query's causal end get scores too (the block's last query
    // sees up to nq - 1 more); its selection never reads them.
    const int64_t n_keys = n_past + t0 + nq;
    if (n_keys <= topk) {  // every visible key survives
      for (int64_t i = 0; i < nq; ++i) select(t0 + i, scores, order);
      return;
    }
    // The block's quantised queries (only the int16 path has room for them).
    auto* pairs = approximate ? reinterpret_cast<int32_t*>(take(kBlock * n_heads * n_pairs))
                              : nullptr;
    float* head_scale = approximate ? take(kBlock * n_heads) : nullptr;
    std::array<float, kBlock> bound_p{}, bound_r{};
    bool block_approximate = approximate;
    for (int64_t i = 0; i < nq && block_approximate; ++i) {
      kernels::IndexerQueryQuant qq{pairs + i * n_heads * n_pairs, head_scale + i * n_heads};
      block_approximate = kernels::QuantizeIndexerQuery(
          qp + (t0 + i) * n_heads * dim, wp + (t0 + i) * n_heads, n_heads, dim, scale, qq);
      bound_p[size_t(i)] = qq.bound_p;
      bound_r[size_t(i)] = qq.bound_r;
    }
    if (!block_approximate) {
      kernels::IndexerScoresQueries(qp + t0 * n_heads * dim, n_heads * dim, wp + t0 * n_heads,
                                    n_heads, nq, n_heads, dim, kp, key_rows.data(), 0, n_keys,
                                    scale, scores, padded, tile);
      for (int64_t i = 0; i < nq; ++i) select(t0 + i, scores + i * padded, order);
      return;
    }
    kernels::IndexerInt16Scores(pairs, n_heads * n_pairs, head_scale, n_heads, wp + t0 * n_heads,
                                n_heads, nq, n_heads, dim, keys_q, 0, n_keys, scores, padded);
    float* bound = take(padded);
    float* q_t = take(slots * dim);
    auto* band_rows = reinterpret_cast<int32_t*>(take(padded));
    cpu::BoundedSelectScratch bs{take(padded),
                                 take(padded),
                                 reinterpret_cast<int32_t*>(take(padded)),
                                 reinterpret_cast<int32_t*>(take(padded)),
                                 take(padded),
                                 order};
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t ti = t0 + i, visible = n_past + ti + 1;
      if (visible <= topk) {
        select(ti, scores, order);
        continue;
      }
      for (int64_t u = 0; u < visible; ++u) {
        bound[u] = (bound_p[size_t(i)] + bound_r[size_t(i)] * keys_q.abs_sum[u]) * keys_q.scale[u] +
                   kernels::kIndexerBoundFloor;
      }
      auto score_exactly = [&](const int32_t* positions, int64_t n, float* out) {
        if (n == 0) return;
        for (int64_t j = 0; j < n; ++j) band_rows[j] = key_rows[size_t(positions[j])];
        kernels::IndexerQueryLayout(qp + ti * n_heads * dim, n_heads, dim, q_t);
        kernels::IndexerScores(q_t, wp + ti * n_heads, n_heads, dim, kp, band_rows, 0, n, scale,
                               out);
      };
      int64_t band = 0;
      counts[size_t(ti)] = int32_t(cpu::SelectTopKWithBounds(scores + i * padded, bound, visible,
                                                             topk, score_exactly, bs,
                                                             selection.data() + ti * topk, &band));
    }
  });
}

void CpuBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                           const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && bias.dtype == DType::kF32 && weight.elements() == n);
  for (int64_t r = 0; r < x.rows(); ++r) {
    cpu::LayerNormRow(x.as<const float>() + r * n, weight.as<const float>(),
                      bias.as<const float>(), eps, n, out.as<float>() + r * n);
  }
}

void CpuBackend::Route(const Tensor& logits, const Tensor* selection_bias, const RouterSpec& spec,
                       std::span<int32_t> ids, std::span<float> weights) {
  const int64_t t = logits.rows(), e = logits.cols(), k = spec.experts_per_token;
  CHECK(ids.size() == size_t(t * k) && weights.size() == size_t(t * k));
  const float* bias = selection_bias ? selection_bias->as<const float>() : nullptr;
  float* scratch = Scratch(0, uint64_t(3 * e));
  for (int64_t i = 0; i < t; ++i) {
    cpu::RouteToken(logits.as<const float>() + i * e, bias, e, spec, scratch, ids.data() + i * k,
                    weights.data() + i * k);
  }
}

void CpuBackend::ScatterRows(const Tensor& src, std::span<const int32_t> rows,
                             const Tensor& dst) {
  if (IsRowQuantizable(dst.dtype) && src.dtype == DType::kF32) {  // into a q8_0 / q4_0 KV cache
    const int64_t n = src.cols();
    const uint64_t row_bytes = dst.row_bytes();
    CHECK(dst.cols() == n && src.rows() == int64_t(rows.size()));
    for (size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i] >= 0 && rows[i] < dst.rows());
      QuantizeRow(dst.dtype, src.as<const float>() + int64_t(i) * n,
                  dst.as<uint8_t>() + uint64_t(rows[i]) * row_bytes, n);
    }
    return;
  }
  if (dst.dtype == DType::kF16 && src.dtype == DType::kF32) {  // into an f16 KV cache
    const int64_t n = src.cols();
    CHECK(dst.cols() == n && src.rows() == int64_t(rows.size()));
    for (size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i] >= 0 && rows[i] < dst.rows());
      kernels::F32ToF16Row(src.as<const float>() + int64_t(i) * n,
                           dst.as<uint16_t>() + int64_t(rows[i]) * n, size_t(n));
    }
    return;
  }
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && src.rows() == int64_t(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i] >= 0 && rows[i] < dst.rows());
    std::memcpy(dst.as<uint8_t>() + rows[i] * row_bytes, src.as<const uint8_t>() + i * row_bytes,
                row_bytes);
  }
}

void CpuBackend::GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) {
  const uint64_t row_bytes = src.row_bytes();
  CHECK(dst.row_bytes() == row_bytes && dst.rows() >= int64_t(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst.as<uint8_t>() + i * row_bytes, src.as<const uint8_t>() + rows[i] * row_bytes,
                row_bytes);
  }
}

void CpuBackend::ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                                std::span<const float> scales, const Tensor& dst) {
  const int64_t n = src.cols();
  CHECK(dst.cols() == n && rows.size() == scales.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const float* s = src.as<const float>() + i * n;
    float* d = dst.as<float>() + rows[i] * n;
    for (int64_t j = 0; j < n; ++j) d[j] += scales[i] * s[j];
  }
}

void CpuBackend::Zero(const Tensor& t) {
  std::memset(t.as<void>(), 0, t.rows() * t.row_bytes());
}

void CpuBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  // Row by row, so that a row's values do not depend on the rows beside it
  // (which of them the vector loop's scalar tail takes).
  const int64_t n = std::max<int64_t>(1, gate.cols());
  ForRows(gate.elements() / n, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      kernels::SiluMul(gate.as<const float>() + r * n, up.as<const float>() + r * n,
                       out.as<float>() + r * n, size_t(n));
    }
  });
}

void CpuBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CHECK(a.elements() == b.elements() && out.elements() == a.elements());
  const float* ap = a.as<const float>();
  const float* bp = b.as<const float>();
  float* op = out.as<float>();
  const int64_t n = std::max<int64_t>(1, a.cols());
  ForRows(a.elements() / n, n, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * n; i < r1 * n; ++i) op[i] = ap[i] + bp[i];
  });
}

void CpuBackend::Copy(const Tensor& src, const Tensor& dst) {
  CHECK(src.dtype == dst.dtype && src.elements() == dst.elements());
  std::memmove(dst.as<void>(), src.as<const void>(), src.rows() * src.row_bytes());
}

void CpuBackend::WriteF32(std::span<const float> src, const Tensor& dst) {
  CHECK(dst.dtype == DType::kF32 && uint64_t(dst.elements()) == src.size());
  std::memcpy(dst.as<float>(), src.data(), src.size() * sizeof(float));
}

void CpuBackend::ReadF32(const Tensor& src, std::span<float> dst) {
  CHECK(uint64_t(src.elements()) == dst.size());
  DequantizeWeightRows(src, 0, src.rows(), dst.data());
}

}  // namespace anymoe
