// The hardware adaptation layer: everything model code asks of a device goes
// through this interface, one virtual call per op, with outputs preallocated by
// the caller. A new accelerator is a new folder implementing it (see
// docs/backends.md); model code never changes. Activations are f32 [rows, cols]
// row-major; weights keep their file dtype (quantised formats included).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace anymoe {

struct TensorInfo;

enum class BackendKind { kCpu };

// How the two halves of a rotated pair are laid out in a head vector.
enum class RopePairing {
  kHalfSplit,    // (z[i], z[i + r/2]): HF rotate_half, NeoX
  kInterleaved,  // (z[2i], z[2i+1]): GPT-J, llama.cpp NORM on permuted GGUF llama weights
};

// Precomputed rotary frequencies of one model (see models/rope.h).
struct RopeTable {
  std::span<const float> inv_freq;  // [rotary_dims / 2]
  int rotary_dims = 0;              // leading dims of each head that rotate
  float attention_factor = 1.0f;    // multiplies cos and sin (YaRN)
  RopePairing pairing = RopePairing::kHalfSplit;
};

// Backend-owned memory; released when destroyed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* base() = 0;
  virtual uint64_t size() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- identity (load time)
  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual int num_threads() const = 0;

  // ---- memory (load time only)
  virtual Expected<std::unique_ptr<Buffer>> Allocate(uint64_t bytes, const std::string& what) = 0;
  // Makes a file tensor usable by this backend's ops. The CPU backend returns a
  // view into the mmap (zero copy); device backends upload (and may repack).
  virtual Expected<Tensor> PrepareWeight(const TensorInfo& info) = 0;

  // ---- ops (hot path). Shapes in brackets; T = tokens in the step.
  // out[t] = table[ids[t]], table [V, H] of any dtype, out [T, H].
  virtual void Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) = 0;
  // out = x / sqrt(mean(x^2) + eps) * weight, per row; out may alias x.
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // y = x . W^T (+ bias): x [T, in] f32, W [out, in] any dtype, bias [out] or null, y [T, out].
  virtual void Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) = 0;
  // In place on x [T, heads, head_dim]; token t sits at positions[t].
  virtual void Rope(const Tensor& x, std::span<const int32_t> positions, const RopeTable& rope) = 0;
  // Causal attention of T new queries over a sequence's cached keys/values.
  // q [T, n_h, d_k]; k_cache [S_max, n_kv, d_k]; v_cache [S_max, n_kv, d_v] with the
  // T new rows already written at [n_past, n_past + T); query t sees keys [0, n_past + t].
  // out [T, n_h, d_v]. Head h reads kv head h / (n_h / n_kv).
  virtual void Attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         int64_t n_past, float scale, const Tensor& out) = 0;
  // out = silu(gate) * up, all [T, I]; out may alias gate.
  virtual void SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;
  // out = a + b, same shapes; out may alias a or b.
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // Copies src rows into dst rows (same dtype and element count).
  virtual void Copy(const Tensor& src, const Tensor& dst) = 0;
  // Copies a tensor's values into host memory as f32 (logits to the sampler).
  virtual void ReadF32(const Tensor& src, std::span<float> dst) = 0;

  // Waits for queued work (no-op on synchronous backends).
  virtual void Synchronize() = 0;
};

struct BackendOptions {
  int num_threads = 0;  // 0: all cores
};

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& name,
                                                 const BackendOptions& options);

}  // namespace anymoe
