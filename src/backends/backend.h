// The hardware adaptation layer: everything model code asks of a device goes
// through this interface, one virtual call per op, with outputs preallocated by
// the caller. A new accelerator is a new folder implementing it (see
// docs/backends.md); model code never changes. Activations are f32 [rows, cols]
// row-major; weights keep their file dtype (quantised formats included).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device_exchange.h"
#include "backends/op.h"
#include "core/numa.h"
#include "core/status.h"
#include "core/tensor.h"

namespace anymoe {

struct TensorInfo;

enum class BackendKind { kCpu, kOpenCl, kCuda };

// How the two halves of a rotated pair are laid out in a head vector.
enum class RopePairing {
  kHalfSplit,    // (z[i], z[i + r/2]): HF rotate_half, NeoX
  kInterleaved,  // (z[2i], z[2i+1]): GPT-J, llama.cpp NORM on permuted GGUF llama weights
};

// Precomputed rotary frequencies of one model (see models/rope.h).
struct RopeTable {
  std::span<const float> inv_freq;  // [rotary_dims / 2]
  int rotary_dims = 0;              // dims of each head that rotate, from `rotary_offset`
  int rotary_offset = 0;            // first rotated dim (MLA puts the rope part last)
  float attention_factor = 1.0f;    // multiplies cos and sin (YaRN)
  RopePairing pairing = RopePairing::kHalfSplit;
};

// How a MoE router turns its logits into experts and weights (always in f32).
struct RouterSpec {
  enum class Scoring { kSoftmax, kSigmoid };
  Scoring scoring = Scoring::kSoftmax;
  int experts_per_token = 0;
  int n_group = 1;        // sigmoid: group-limited selection
  int topk_group = 1;
  bool normalize = false;        // renormalise the chosen weights to sum 1
  float scaling = 1.0f;          // routed_scaling_factor, after normalisation
};

// For each query row, the cached keys it may attend to (DSA top-k), ascending.
struct KeySelection {
  std::span<const int32_t> keys;    // [T, stride]
  std::span<const int32_t> counts;  // [T]; row t uses keys[t * stride, + counts[t])
  int64_t stride = 0;
};

// GLM-5.3-Flash's mHC hyper-connections (Backend::HyperConnectionWeights).
struct HyperConnectionSpec {
  int64_t streams = 0;  // hc_mult N
  int64_t sinkhorn_iters = 20;
  float eps = 1e-6f;
  const Tensor* base = nullptr;   // [(2 + N) N]
  const Tensor* scale = nullptr;  // [3]
};

// Kimi delta attention (Backend::KimiDeltaAttention).
struct KdaSpec {
  int64_t heads = 0, head_dim = 0, conv_kernel = 0;
  bool bounded_gate = true;
  float lower_bound = -5.0f;
  float norm_eps = 1e-5f;
  const Tensor* conv = nullptr;     // [3D, conv_kernel] f32
  const Tensor* dt_bias = nullptr;  // [D]
  const Tensor* a_log = nullptr;    // [heads]
  const Tensor* o_norm = nullptr;   // [head_dim]
};

// The KPool DSA indexer (Backend::KPoolTopK).
struct KPoolSpec {
  int64_t heads = 0, head_dim = 0, pool = 0, topk = 0;
  bool tail = true;
  float scale = 1.0f;
  const Tensor* ape = nullptr;  // [pool, head_dim]
};

// One output of MultiMatmul: out = x . weight^T (+ bias).
struct Projection {
  const Tensor* weight = nullptr;
  const Tensor* bias = nullptr;  // [out] or null
  Tensor out;
};

// One sequence's share of a step's attention: the arguments of Attention.
struct AttentionJob {
  Tensor q;  // [T, n_h, d_k]
  const Tensor* k_pool = nullptr;
  const Tensor* v_pool = nullptr;
  std::span<const int32_t> key_rows;
  int64_t n_past = 0;
  Tensor out;  // [T, n_h, d_v]
};

// One output of MultiGroupedMatmul: rows of group g times weights[g].
struct GroupedProjection {
  std::span<const Tensor> weights;  // one per group
  Tensor out;
};

// The RMSNorm a FusedMatmul applies to its input rows before multiplying.
struct RowNorm {
  const Tensor* weight = nullptr;  // [K] f32
  float eps = 0.0f;
  Tensor out;  // [T, K] scratch: a backend that does not fuse writes rmsnorm(x) here first
};

// What FusedMatmul does around its projections (all optional).
struct MatmulFusion {
  const RowNorm* norm = nullptr;  // multiply rmsnorm(x) * norm->weight instead of x
  // Two projections (gate, up) of equal shape: projections[0].out = silu(gate) * up;
  // projections[1].out is scratch.
  bool swiglu = false;
  // One projection: *residual += its result (the residual stream; must not
  // overlap x); projections[0].out is scratch.
  const Tensor* residual = nullptr;
};

// One sequence's share of a StepAttention: its rows of the step and its cache.
struct AttentionSegment {
  int64_t row0 = 0, rows = 0;  // rows [row0, row0 + rows) of the step
  const Tensor* k_pool = nullptr;  // [R, n_kv, d_k], the paged cache (as Attention)
  const Tensor* v_pool = nullptr;  // [R, n_kv, d_v]
  std::span<const int32_t> key_rows;  // pool row of each position < n_past + rows
  int64_t n_past = 0;                 // positions already cached
};

// The GQA attention of one step over every sequence's cache (see StepAttention).
struct AttentionStep {
  Tensor q;  // [T, n_h, d_k], before RoPE
  Tensor k;  // [T, n_kv, d_k], the step's new keys, before RoPE
  Tensor v;  // [T, n_kv, d_v], the step's new values
  std::span<const int32_t> positions;  // [T]: each row's position in its sequence
  const RopeTable* rope = nullptr;
  std::span<const AttentionSegment> segments;  // in row order, covering [0, T)
  float scale = 1.0f;
  Tensor out;  // [T, n_h, d_v]
};

// The query shape of a DSA indexer (IndexerTopK's q is [tokens, heads, dim]).
struct IndexerShape {
  int64_t heads = 0, dim = 0;
};

// The shape of the attention calls a model makes over its cached keys
// (Attention / StepAttention: q [T, q_heads, d_k], pools of kv_heads heads,
// values of d_v), q_heads 0 if it makes none.
struct AttentionShape {
  int64_t q_heads = 0, kv_heads = 0, d_k = 0, d_v = 0;
  bool operator==(const AttentionShape&) const = default;
};

// The query shape of LatentAttention calls (absorbed MLA: q [T, heads, d]
// over latent rows of d values whose first latent_dim are the value), heads 0
// if a model makes none.
struct LatentShape {
  int64_t heads = 0, d = 0, latent_dim = 0;
};

// A kind of matmul a model makes: weights of `dtype` over inputs of `in`
// values, `rows_per_token` input rows per step token (routed experts: top-k)
// spread over up to `groups` weights (experts) at once.
struct MatmulInput {
  DType dtype = DType::kF32;
  int64_t in = 0, rows_per_token = 1, groups = 1;
  bool operator==(const MatmulInput&) const = default;
};

// What per-op scratch grows with: a sequence's cached keys (up to max_keys),
// the tokens of one step (up to step_tokens), and the model's attention
// (GQA and latent), DSA indexer and matmul shapes.
struct ContextShape {
  int64_t max_keys = 0, step_tokens = 0;
  std::vector<AttentionShape> attention;  // the distinct shapes of its layers
  LatentShape latent;                     // its absorbed MLA layers' (all alike)
  IndexerShape indexer;
  std::vector<MatmulInput> matmuls;  // the distinct kinds of its weights
};

// Backend-owned memory; released when destroyed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* base() = 0;
  virtual uint64_t size() const = 0;
};

// Device memory a loaded model needs, worked out before load by a dry run of the
// loader (models/memory_plan.h). Device backends reserve it all at once.
struct MemoryPlan {
  uint64_t weights = 0;      // as PrepareWeight stores them, plus derived weights
  uint64_t kv_cache = 0;     // the KV pool for `kv_tokens` tokens
  uint64_t activations = 0;  // step buffers and workspace for `max_step_tokens`
  uint64_t context_scratch = 0;  // the backend's own scratch for the context (DSA indexer)
  uint64_t expert_cache = 0; // slots of the routed-expert cache (streamed experts)
  int64_t expert_cache_slots = 0;  // experts it holds at once
  uint64_t streamed_weights = 0;  // routed experts left in the file (not in total())
  uint64_t cpu_weights = 0;  // routed experts kept on the host by --cpu-moe (not in total())
  uint64_t buffers = 0;      // how many Allocate/PrepareWeight calls (alignment slack)
  int64_t kv_tokens = 0;
  int64_t max_step_tokens = 0;
  uint64_t total() const {
    return weights + kv_cache + activations + context_scratch + expert_cache;
  }
};

// What `anymoe doctor` reports about the device under a backend.
struct DeviceInfo {
  std::string name;
  uint64_t memory_bytes = 0;    // global memory of the device (0: unknown / host)
  uint64_t reserved_bytes = 0;  // the arena reserved by ReserveMemory
  uint64_t scratch_bytes = 0;   // the backend's own part of it (uploads, op scratch)
  uint64_t allocations = 0;     // device allocation calls so far (none may follow load)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- identity (load time)
  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual int num_threads() const = 0;

  // ---- capabilities (load time). Device backends override these; see docs/backends.md.
  // Whether `op` runs natively for operands of `dtype` (the weight's dtype for
  // Embedding, Matmul and GroupedMatmul; f32 for every other op). Unsupported
  // pairs run on the CPU through FallbackBackend (backends/fallback_backend.h).
  virtual bool Supports(Op op, DType dtype) const { return true; }
  virtual DeviceInfo device() const { return DeviceInfo{name(), 0, 0, 0, 0}; }
  // True for backends that must reserve all device memory before load: the
  // loader then plans it (MemoryPlan) and calls ReserveMemory once.
  virtual bool wants_memory_plan() const { return false; }
  virtual Status ReserveMemory(const MemoryPlan& plan) { return Status::Ok(); }
  // The device memory ReserveMemory(plan) needs (the plan plus the backend's
  // own staging, scratch and alignment), so that a caller can size a device
  // expert cache to what --mem-budget leaves; 0 on host backends.
  virtual uint64_t DeviceBytesFor(const MemoryPlan& plan) const { return 0; }

  // ---- memory (load time only)
  // `what` names the purpose in errors and plans; kExpertCacheBuffer marks the
  // slots of a device expert cache (weights only the device holds).
  static constexpr const char* kExpertCacheBuffer = "expert cache";
  virtual Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) = 0;
  // Sizes per-op scratch for `shape` (called when a cache is made), so that
  // no op reallocates a buffer as the context grows: the DSA indexer's scores
  // and picks and the attention tiles' segment partials grow with the keys.
  virtual Status ReserveForContext(const ContextShape& shape) = 0;
  // The most host memory that scratch can hold for `shape`, so that the
  // memory plan counts it (0 where it holds none outside its reservation).
  virtual uint64_t ContextScratchBytes(const ContextShape& shape) const { return 0; }
  // Every weight is prepared: a backend may give back what loading left over
  // (the CPU backend unmaps the unused tail of its last panel chunk), so that
  // the process holds what the memory plan says.
  virtual void FinishLoad() {}
  // Makes a file tensor usable by this backend's ops. The CPU backend returns a
  // view into the mmap (zero copy); device backends upload (and may repack).
  virtual Expected<Tensor> PrepareWeight(const TensorInfo& info) = 0;
  // A weight kept in host memory and read by the CPU whatever the backend: the
  // routed experts of --cpu-moe / --n-cpu-moe. Ops given one run on the CPU
  // (FallbackBackend), and the memory plan counts it apart from the device's
  // weights (MemoryPlan::cpu_weights). On the CPU it is PrepareWeight.
  virtual Expected<Tensor> PrepareCpuWeight(const TensorInfo& info) { return PrepareWeight(info); }

  // ---- ops (hot path). Shapes in brackets; T = tokens in the step.
  // out[t] = table[ids[t]], table [V, H] of any dtype, out [T, H].
  virtual void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) = 0;
  // out = x / sqrt(mean(x^2) + eps) * weight, per row; out may alias x.
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // y = x . W^T (+ bias): x [T, in] f32, W [out, in] any dtype, bias [out] or null, y [T, out].
  virtual void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) = 0;
  // Several projections of the same x (q/k/v, gate/up), which a backend may run
  // as one pass: x prepared once, one dispatch. The default runs Matmul each.
  virtual void MultiMatmul(const Tensor& x, std::span<const Projection> projections) {
    for (const Projection& p : projections) Matmul(x, *p.weight, p.bias, p.out);
  }
  // MultiMatmul with the RMSNorm before it and SwiGLU or a residual add after
  // it in one pass where the backend can (a decode step's layer is then a few
  // device launches instead of a dozen). The default makes the separate calls
  // (RmsNorm, MultiMatmul, SwiGlu or Add), so results are those of the
  // unfused calls on every backend.
  virtual void FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                           const MatmulFusion& fusion);
  // In place on x [T, heads, head_dim]; token t sits at positions[t].
  virtual void Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) = 0;
  // Causal attention of T new queries over one sequence's cached keys/values.
  // q [T, n_h, d_k]; k_pool [R, n_kv, d_k], v_pool [R, n_kv, d_v]: the paged cache;
  // key_rows[p] is the pool row of position p, for p < n_past + T (the T new rows
  // already written). Query t sees positions [0, n_past + t]. out [T, n_h, d_v];
  // head h reads kv head h / (n_h / n_kv).
  virtual void Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                         std::span<const int32_t> key_rows, int64_t n_past, float scale,
                         const Tensor& out) = 0;
  // Attention for several sequences of one step, which a backend may run as one
  // dispatch (a decode step has one query per sequence: too little work each
  // for a parallel region of its own). The default runs Attention for each.
  virtual void MultiAttention(std::span<const AttentionJob> jobs, float scale) {
    for (const AttentionJob& j : jobs) {
      Attention(j.q, *j.k_pool, *j.v_pool, j.key_rows, j.n_past, scale, j.out);
    }
  }
  // A step's GQA attention for all its sequences: RoPE on q and k at
  // `positions`, each sequence's new k and v rows written to its cache at
  // key_rows[n_past ..], then causal attention of each sequence's queries over
  // its cache (as Attention). q and k are scratch afterwards (rotated or not).
  // The default makes the separate calls (Rope, ScatterRows, MultiAttention);
  // a device backend does it in one or two launches for all sequences.
  virtual void StepAttention(const AttentionStep& step);
  // Multi-head latent attention over a latent cache (absorbed form, MQA-like):
  // q [T, n_h, d_c + d_r] (query in latent space | rotated rope part); pool
  // [R, d_c + d_r] (normalised latent | rotated k_rope), addressed through
  // key_rows as in Attention; out [T, n_h, d_c] = softmax(q.k * scale) . latent.
  // `selection` (optional) restricts each query to its DSA top-k positions.
  virtual void LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                               std::span<const int32_t> key_rows, int64_t n_past, float scale,
                               const KeySelection* selection, const Tensor& out) = 0;
  // Per-head projection: y[t, h] = W[h] . x[t, h]. W [n_h, d_out, d_in] f32; x holds
  // T x n_h slots of x_stride floats (the first d_in used), y T x n_h slots of
  // y_stride floats (the first d_out written).
  virtual void HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w, const Tensor& y,
                          int64_t y_stride) = 0;
  // dst[r, dst_col + j] = src[r, src_col + j] for j < n, every row r (f32).
  virtual void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                           int64_t dst_col, int64_t n) = 0;
  // DSA lightning indexer: score(t, u) = sum_h w[t, h] * relu(scale * q[t, h] . k[u]) over
  // positions u <= n_past + t; writes the top `topk` positions of each query (all of
  // them when fewer), ascending, into `selection` (host memory, [T, topk]) and their
  // counts. q [T, n_I, d_I], pool [R, d_I] read through key_rows, w [T, n_I].
  virtual void IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                           std::span<const int32_t> key_rows, int64_t n_past, float scale,
                           int64_t topk, std::span<int32_t> selection,
                           std::span<int32_t> counts) = 0;
  // out = (x - mean) / sqrt(var + eps) * weight + bias, per row.
  virtual void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                         const Tensor& out) = 0;
  // MoE routing in f32: logits [T, E] (+ selection-only bias [E]) -> expert ids
  // [T, K] (ties to the lower id) and their weights [T, K], into host memory.
  virtual void Route(const Tensor& logits, const Tensor* selection_bias, const RouterSpec& spec,
                     std::span<int32_t> ids, std::span<float> weights) = 0;
  // MoE experts in one call: rows [offsets[g], offsets[g+1]) of x [M, K] are
  // multiplied by weights[g] ([N, K], any dtype) into the same rows of y [M, N].
  // Groups with no rows cost nothing.
  virtual void GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                             std::span<const int32_t> offsets, const Tensor& y) = 0;
  // GroupedMatmul for several weight sets over the same rows and offsets (the
  // experts' gate and up), which a backend may run as one pass. The default
  // calls GroupedMatmul for each.
  virtual void MultiGroupedMatmul(const Tensor& x, std::span<const GroupedProjection> projections,
                                  std::span<const int32_t> offsets) {
    for (const GroupedProjection& p : projections) GroupedMatmul(x, p.weights, offsets, p.out);
  }
  // dst[rows[i]] = src[i] (writing a step's new rows into the paged cache).
  virtual void ScatterRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) = 0;
  // dst[i] = src[rows[i]] for each listed row.
  virtual void GatherRows(const Tensor& src, std::span<const int32_t> rows, const Tensor& dst) = 0;
  // dst[rows[i]] += scales[i] * src[i].
  virtual void ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                              std::span<const float> scales, const Tensor& dst) = 0;
  // Sets every element to zero.
  virtual void Zero(const Tensor& t) = 0;
  // out = silu(gate) * up, all [T, I]; out may alias gate.
  virtual void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // GLM-5.3-Flash's ops (shared/new-archs.md §1). Their default forms compute
  // on the host through ReadF32 / WriteF32 (backends/cpu/{kda,hyper_connection,
  // kpool}.h), so every backend runs them; no backend has native kernels yet.
  //
  // out = silu(min(gate, limit)) * clamp(up, -limit, limit), all [T, I]; out may alias gate.
  virtual void ClampedSwiGlu(const Tensor& gate, const Tensor& up, float limit, const Tensor& out);
  // SwiGlu, or ClampedSwiGlu for a limit > 0 (GLM-5.3's swiglu_limit).
  void SwiGluLimited(const Tensor& gate, const Tensor& up, float limit, const Tensor& out) {
    if (limit > 0) {
      ClampedSwiGlu(gate, up, limit, out);
    } else {
      SwiGlu(gate, up, out);
    }
  }
  // mHC: mix [T, (2 + N) N] (the RMS-normed streams times fn^T) and the
  // streams x [T, N H] -> collapsed [T, H], post [T, N], comb [T, N N].
  virtual void HyperConnectionWeights(const HyperConnectionSpec& spec, const Tensor& mix,
                                      const Tensor& x, const Tensor& collapsed, const Tensor& post,
                                      const Tensor& comb);
  // mHC: x[n] <- post[n] * y + sum_m comb[m, n] x[m] per token; y [T, H].
  virtual void HyperConnectionExpand(const HyperConnectionSpec& spec, const Tensor& y,
                                     const Tensor& post, const Tensor& comb, const Tensor& x);
  // out [T, H] = the mean of x's N streams [T, N H] (mHC's final collapse).
  virtual void MeanOfStreams(const Tensor& x, int64_t streams, const Tensor& out);
  // KDA for one sequence's T rows: u [T, 3D] (q|k|v before the conv), f [T, D]
  // (forget gate before dt_bias), beta [T, heads] (logits), gate [T, D] (output
  // gate before the sigmoid); advances state (that sequence's conv rows and
  // [heads, d, d] f32 state) and writes out [T, D]. `chunked`: the chunked
  // (WY) form of the delta rule, else the recurrent one.
  virtual void KimiDeltaAttention(const KdaSpec& spec, bool chunked, const Tensor& u,
                                  const Tensor& f, const Tensor& beta, const Tensor& gate,
                                  const Tensor& state, const Tensor& out);
  // KPool DSA for one sequence's queries at n_past..: q [T, n_I, d_I], head
  // weights [T, n_I]; pool [R, 2 d_I] the cached (key | gate score) rows read
  // through key_rows. Writes each query's kept positions, ascending, into
  // selection (host, [T, topk + pool - 1]) and their counts.
  virtual void KPoolTopK(const KPoolSpec& spec, const Tensor& q, const Tensor& head_weights,
                         const Tensor& pool, std::span<const int32_t> key_rows, int64_t n_past,
                         std::span<int32_t> selection, std::span<int32_t> counts);
  // out = a + b, same shapes; out may alias a or b.
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // Copies src rows into dst rows (same dtype and element count).
  virtual void Copy(const Tensor& src, const Tensor& dst) = 0;
  // Copies a tensor's values into host memory as f32 (logits to the sampler).
  virtual void ReadF32(const Tensor& src, std::span<float> dst) = 0;
  // Copies host f32 values into an f32 tensor (load-time derived weights).
  virtual void WriteF32(std::span<const float> src, const Tensor& dst) = 0;
  // `bytes` raw bytes (a routed expert's matrix as the file stores it) into a
  // buffer from Allocate at dst.offset, done when it returns. The device
  // expert cache's I/O threads call it while the model's thread runs ops, so
  // a backend serialises it against its own queue; a later op that reads the
  // bytes sees them, and ops queued before it have read what was there.
  virtual void WriteBytes(const void* src, uint64_t bytes, const Tensor& dst) {
    std::memcpy(static_cast<uint8_t*>(dst.base) + dst.offset, src, bytes);
  }

  // Waits for queued work (no-op on synchronous backends).
  virtual void Synchronize() = 0;
  // A hint that the caller turns to host work for a while (sampling, sending
  // tokens): the backend may hand its worker threads' cores back to the OS
  // until the next op.
  virtual void Idle() {}
  // Device commands enqueued since creation (kernel launches, fills and
  // device-to-device copies) and host<->device copies: `anymoe bench
  // --op-profile` reports them per op and per step. 0 on the CPU.
  virtual uint64_t launches() const { return 0; }
  virtual uint64_t transfers() const { return 0; }
  // Exchanges with the other ranks' devices that stay on the device (NCCL
  // between CUDA ranks); null where there are none (the CPU, OpenCL, a CUDA
  // build without NCCL): expert parallelism then goes through host memory.
  virtual DeviceExchange* device_exchange() { return nullptr; }
};

// Whether the CPU's DSA indexer scores a prefill in int16 first (see
// BackendOptions::int16_indexer): where it pays, always, or never.
enum class Int16Indexer : uint8_t { kAuto, kOn, kOff };

struct BackendOptions {
  int num_threads = 0;  // 0: all cores
  int device = 0;       // device index for device backends (as `anymoe doctor` lists them)
  // Device memory to reserve (0: exactly what the model plans to need). Loading
  // fails with needed vs available bytes when the plan does not fit.
  uint64_t mem_budget = 0;
  // Comma-separated op names (see op.h) forced onto the CPU fallback even where
  // the device supports them; also read from $ANYMOE_DISABLE_OPS. For tests and
  // for bisecting a device kernel.
  std::string disabled_ops = "";
  // Record every op x dtype the model calls (for `anymoe doctor`); wraps even
  // the CPU backend in FallbackBackend.
  bool record_ops = false;
  // Time every op to its completion (FallbackBackend::times, `anymoe bench
  // --op-profile`); implies record_ops. Device backends are synchronised after
  // each op, so timed runs are slower.
  bool time_ops = false;
  // Keep activations in f32 for every matmul. Off (the default), small steps of
  // quantised weights round activations to int8 per block of 32 for integer
  // dot products, as llama.cpp does: faster, and further from the f32 reference.
  bool exact_matmul = false;
  // CPU: store q8_0 / q4_0 / q4_1 matrices in the 8-row panel layout the x86
  // integer kernels read (same bytes; the file's pages are released), where the
  // machine has those kernels. Off: every weight used in place from the mmap.
  bool repack_weights = true;
  // CPU: keep no weight in place in the file mapping: copy each into memory of
  // its own at load (panels stand in for q8_0/q4_0/q4_1 matrices). With
  // streamed experts the engine sets it, so that a model file that shrinks
  // under a running process fails expert reads with an error instead of
  // faulting on a resident weight.
  bool copy_weights = false;
  // CPU: fault in at load the file pages of the weights it uses in place from
  // the mapping (not those it repacks or copies, which it reads once and
  // releases), so that no decode step waits on the disk. The CPU standing in
  // for a device (the fallback) leaves them to be faulted on use.
  bool populate_weights = true;
  // CPU, DSA models: a prefill's indexer scores in int16 with error bounds and
  // exact scores only near each query's top-k threshold (the same selection;
  // CpuBackend::IndexerTopK). kAuto: where the kernels' target makes it pay
  // (AVX-512 VNNI: 1.3x the exact indexer; on AVX2 it was slower; see
  // docs/benchmarks.md).
  Int16Indexer int16_indexer = Int16Indexer::kAuto;
  // CPU: thread pinning and memory policy over NUMA nodes (core/numa.h); set
  // when the backend is created, before any weight is touched.
  NumaMode numa = NumaMode::kNone;
};

// "cpu", or a device backend ("opencl") wrapped in FallbackBackend.
Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& name,
                                                 const BackendOptions& options);
// The backend names this build knows ("cpu" first).
std::vector<std::string> AvailableBackends();
// Backend::Supports of a device backend this build has, answered without a
// device (for `anymoe doctor` on a machine without one); null when the backend
// is unknown, is the CPU, or needs its device to tell.
using SupportsFn = bool (*)(Op op, DType dtype);
SupportsFn DeviceSupportsTable(const std::string& name);

}  // namespace anymoe
