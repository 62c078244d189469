// The CPU backend: q8_0 / q4_0 / q4_1 matrices stored once at load in the
// panel layout of the x86 integer kernels, in huge pages (where the machine has those
// kernels; --no-repack keeps them in the file), every other weight used in
// place from the mmap; activations in host memory, work split over a
// persistent thread pool, f32-activation products through the batch-invariant
// kernels of kernels/float_matmul.h.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/huge_page_arena.h"
#include "core/thread_pool.h"

namespace anymoe {

class CpuBackend final : public Backend {
 public:
  // repack_weights: q8_0 / q4_0 / q4_1 matrices are also stored in the panel
  // layout of the x86 integer kernels (where the machine has them) and the
  // matmuls read that copy; off, every weight is used in place from the mmap.
  // copy_weights: see BackendOptions::copy_weights.
  // placement: the CPUs of the pool's threads (core/numa.h; `numa` names its
  // mode for device()); its memory policy is the creator's to apply.
  explicit CpuBackend(int num_threads, bool exact_matmul = false, bool repack_weights = true,
                      bool copy_weights = false, NumaMode numa = NumaMode::kNone,
                      NumaPlacement placement = {});

  // See BackendOptions::int16_indexer (kAuto by default).
  void set_int16_indexer(Int16Indexer mode) { int16_indexer_ = mode; }
  void set_populate_weights(bool populate) { populate_weights_ = populate; }

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string name() const override { return "cpu"; }
  // "cpu: N threads, SIMD kernels <target> (available: ...)[, numa ...]".
  DeviceInfo device() const override;
  int num_threads() const override { return pool_.num_threads(); }

  Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) override;
  Expected<Tensor> PrepareWeight(const TensorInfo& info) override;
  Status ReserveForContext(const ContextShape& shape) override;
  uint64_t ContextScratchBytes(const ContextShape& shape) const override;
  // Bytes of f32 scratch reserved now (shared, per thread, attention
  // partials), for tests of the plan.
  uint64_t scratch_bytes() const;
  void FinishLoad() override { panels_.Seal(); }

  void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) override;
  void MultiMatmul(const Tensor& x, std::span<const Projection> projections) override;
  void Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) override;
  void Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                 std::span<const int32_t> key_rows, int64_t n_past, float scale,
                 const Tensor& out) override;
  void MultiAttention(std::span<const AttentionJob> jobs, float scale) override;
  void LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                       std::span<const int32_t> key_rows, int64_t n_past, float scale,
                       const KeySelection* selection, const Tensor& out) override;
  void HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                  int64_t y_stride) override;
  void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                   int64_t n) override;
  void IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                   std::span<const int32_t> key_rows, int64_t n_past, float scale, int64_t topk,
                   std::span<int32_t> selection, std::span<int32_t> counts) override;
  void ScatterRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) override;
  void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                 const Tensor& out) override;
  void Route(const Tensor& logits, const Tensor* selection_bias, const RouterSpec& spec,
             std::span<int32_t> ids, std::span<float> weights) override;
  void GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                     std::span<const int32_t> offsets, const Tensor& y) override;
  void MultiGroupedMatmul(const Tensor& x, std::span<const GroupedProjection> projections,
                          std::span<const int32_t> offsets) override;
  void GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) override;
  void ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                      std::span<const float> scales, const Tensor& dst) override;
  void Zero(const Tensor& t) override;
  void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Copy(const Tensor& src, const Tensor& dst) override;
  void ReadF32(const Tensor& src, std::span<float> dst) override;
  void WriteF32(std::span<const float> src, const Tensor& dst) override;
  void Synchronize() override {}
  void Idle() override { pool_.Park(); }

 private:
  // IndexerTopK's work split: keys scored per run, the most queries a step
  // spreads by keys, and the queries of one prefill task.
  static constexpr int64_t kIndexerRunKeys = 1024;
  static constexpr int64_t kIndexerFewQueries = 8;
  static constexpr int64_t kIndexerQueryBlock = 8;
  // What ReserveForContext reserves, in floats: the shared scratch, each
  // thread's, and the few-token attention partials.
  struct ContextFloats {
    uint64_t shared = 0, per_thread = 0, partials = 0;
  };
  ContextFloats ContextScratch(const ContextShape& shape) const;
  ContextFloats IndexerScratch(int64_t max_keys, IndexerShape indexer) const;
  ContextFloats AttentionScratch(int64_t max_keys, int64_t step_tokens,
                                 const AttentionShape& attention) const;
  ContextFloats LatentScratch(int64_t max_keys, int64_t step_tokens,
                              const LatentShape& latent) const;
  // Per-thread f32 scratch, grown on first use and then reused (no per-token allocation).
  float* Scratch(int thread, uint64_t floats);
  float* SharedScratch(uint64_t floats);
  // Grows every thread's scratch to `floats`, on the calling thread, before a
  // parallel loop whose tasks need different sizes: otherwise whichever thread
  // first draws the biggest task allocates mid-step, and which one that is
  // depends on scheduling (a loaded CI machine saw a warm decode allocate).
  void ReserveScratch(uint64_t floats);
  // MultiAttention with a task per token (steps of 4+ tokens per thread).
  void AttendPerToken(std::span<const AttentionJob> jobs, float scale);
  // fn(r0, r1) over row ranges of [0, rows): on all threads when the op touches
  // enough elements to repay a parallel region, else on the caller alone.
  void ForRows(int64_t rows, int64_t elements_per_row, FunctionRef<void(int64_t, int64_t)> fn);
  // Packs w into an owned panel-layout copy and points w.panels at it.
  Status StorePanels(const std::string& name, Tensor& w);
  // The RoPE cosines and sines of `positions` ([T, rotary_dims / 2] each),
  // computed when the positions or the table differ from the last call: every
  // layer of a step rotates the same positions (q and k), and sin/cos of each
  // was ~2% of a batched decode step.
  void UpdateRopeAngles(std::span<const int32_t> positions, const RopeTable& rope);

  const NumaMode numa_;
  const NumaPlacement placement_;
  ThreadPool pool_;
  const bool exact_matmul_;
  const bool repack_weights_;
  Int16Indexer int16_indexer_ = Int16Indexer::kAuto;
  // Whether a prefill's IndexerTopK takes the int16 path now (the kernels'
  // target can change between calls: SelectCpuTarget).
  bool UseInt16Indexer() const;
  const bool copy_weights_;
  bool populate_weights_ = true;  // BackendOptions::populate_weights
  std::vector<std::vector<float>> scratch_;
  std::vector<float> shared_scratch_;  // quantised activations of the current matmul, DSA scores
  std::vector<float> attention_partials_;  // segments of few-token attention, until merged
  std::vector<int32_t> rope_positions_;  // the positions rope_cos_ / rope_sin_ are for,
  std::vector<float> rope_freqs_;        // and the table's frequencies and factor
  float rope_factor_ = 0.0f;
  std::vector<float> rope_cos_, rope_sin_;
  std::vector<std::unique_ptr<Buffer>> owned_;  // weights converted at load
  cpu::HugePageArena panels_;                    // weights stored as panels at load
};

}  // namespace anymoe
