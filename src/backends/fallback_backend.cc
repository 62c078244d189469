#include "backends/fallback_backend.h"

#include <chrono>
#include <cstdio>
#include <functional>

#include "formats/tensor_source.h"

namespace anymoe {

// Host stand-ins for one fallback call's device tensors. Every tensor the CPU
// op may write is read first and written back after (ops such as GatherRows or
// ScatterRows change only some rows of their output).
class FallbackBackend::HostCall {
 public:
  explicit HostCall(FallbackBackend& fb) : fb_(fb) {}
  ~HostCall() {
    for (const auto& [device, host] : outputs_) {
      fb_.device_->WriteF32(std::span(host.as<const float>(), size_t(host.elements())), device);
    }
  }
  // A tensor the op only reads.
  Tensor In(const Tensor& t) { return Host(t); }
  // A tensor the op writes (in part or whole).
  Tensor Out(const Tensor& t) {
    const Tensor h = Host(t);
    outputs_.emplace_back(t, h);
    return h;
  }

 private:
  Tensor Host(const Tensor& t) {
    if (fb_.cpu_weights_.count(t.base) > 0) return t;  // host memory already
    if (auto w = fb_.weights_.find(t.base); w != fb_.weights_.end()) {
      Tensor h = t;  // same dtype and layout as in the file: the offset carries over
      h.base = w->second.base;
      h.offset = w->second.offset + t.offset;
      h.scales = w->second.scales;
      CHECK(h.dtype == w->second.dtype);
      return h;
    }
    auto m = fb_.mirrors_.find(t.base);
    CHECK(m != fb_.mirrors_.end() && t.dtype == DType::kF32 && t.offset % 4 == 0);
    Mirror& mirror = m->second;
    if (mirror.host.empty()) mirror.host.resize((mirror.bytes + 3) / 4);
    Tensor h = t;
    h.base = mirror.host.data();
    fb_.device_->ReadF32(t, std::span(h.as<float>(), size_t(t.elements())));
    return h;
  }

  FallbackBackend& fb_;
  std::vector<std::pair<Tensor, Tensor>> outputs_;  // (device, host)
};

// One op call: recorded (and its place decided) when made; with time_ops,
// timed from here until the op has completed, its fallback copies included.
class FallbackBackend::OpScope {
 public:
  OpScope(FallbackBackend& fb, Op op, DType dtype, int fusion = kPlain, bool cpu_weights = false)
      : native(fb.OnDevice(op, dtype, cpu_weights)),
        fb_(fb),
        op_(size_t(op)),
        fusion_(size_t(fusion)),
        dtype_(size_t(dtype)) {
    if (!fb_.time_ops_) return;
    launches_ = fb_.device_->launches();
    transfers_ = fb_.device_->transfers();
    start_ = Clock::now();
  }
  ~OpScope() {
    if (!fb_.time_ops_) return;
    fb_.device_->Synchronize();
    fb_.seconds_[op_][fusion_][dtype_] +=
        std::chrono::duration<double>(Clock::now() - start_).count();
    ++fb_.timed_calls_[op_][fusion_][dtype_];
    // A fallback's copies are transfers too; the CPU's own work launches nothing.
    fb_.launches_[op_][fusion_][dtype_] += fb_.device_->launches() - launches_;
    fb_.transfers_[op_][fusion_][dtype_] += fb_.device_->transfers() - transfers_;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  const bool native;  // runs on the device

 private:
  using Clock = std::chrono::steady_clock;
  FallbackBackend& fb_;
  size_t op_, fusion_, dtype_;
  Clock::time_point start_;
  uint64_t launches_ = 0, transfers_ = 0;  // the device's counts at the call
};

namespace {

// Unregisters a buffer's mirror when the buffer goes (its handle may be reused).
class ForgetfulBuffer final : public Buffer {
 public:
  ForgetfulBuffer(std::unique_ptr<Buffer> inner, std::function<void(void*)> forget)
      : inner_(std::move(inner)), forget_(std::move(forget)) {}
  ~ForgetfulBuffer() override { forget_(inner_->base()); }
  void* base() override { return inner_->base(); }
  uint64_t size() const override { return inner_->size(); }

 private:
  std::unique_ptr<Buffer> inner_;
  std::function<void(void*)> forget_;
};

}  // namespace

FallbackBackend::FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> cpu,
                                 std::vector<Op> disabled, bool time_ops)
    : device_(std::move(device)), cpu_(std::move(cpu)), time_ops_(time_ops) {
  for (Op op : disabled) disabled_[size_t(op)] = true;
}

bool FallbackBackend::Native(Op op, DType dtype) const {
  if (device_->kind() == BackendKind::kCpu) return true;  // recording only
  return !disabled_[size_t(op)] && device_->Supports(op, dtype);
}

bool FallbackBackend::OnDevice(Op op, DType dtype, bool cpu_weights) {
  const size_t o = size_t(op), d = size_t(dtype);
  if (cpu_weights) {
    ++cpu_weight_calls_[o][d];
    return false;
  }
  ++calls_[o][d];
  const bool native = Native(op, dtype);
  if (!native && !reported_[o][d]) {
    reported_[o][d] = true;
    std::fprintf(stderr, "anymoe: %s: %s on %s runs on the CPU (%s)\n", device_->name().c_str(),
                 std::string(OpName(op)).c_str(), std::string(Name(dtype)).c_str(),
                 disabled_[o] ? "disabled by ANYMOE_DISABLE_OPS" : "no native kernel");
  }
  return native;
}

std::vector<FallbackBackend::Usage> FallbackBackend::usage() const {
  std::vector<Usage> out;
  for (int o = 0; o < kNumOps; ++o) {
    for (int d = 0; d < kDTypes; ++d) {
      if (calls_[size_t(o)][size_t(d)] > 0) {
        out.push_back(
            Usage{Op(o), DType(d), Native(Op(o), DType(d)), calls_[size_t(o)][size_t(d)]});
      }
      if (cpu_weight_calls_[size_t(o)][size_t(d)] > 0) {
        out.push_back(Usage{Op(o), DType(d), false, cpu_weight_calls_[size_t(o)][size_t(d)], true});
      }
    }
  }
  return out;
}

std::string FallbackBackend::Label(Op op, int fusion) {
  std::string s;
  if (fusion & kRopeAndCacheWrite) s += "Rope+ScatterRows+";
  if (fusion & kNormBefore) s += "RmsNorm+";
  s += OpName(op);
  if (fusion & kSwiGluAfter) s += "+SwiGlu";
  if (fusion & kAddAfter) s += "+Add";
  return s;
}

std::vector<FallbackBackend::OpTime> FallbackBackend::times() const {
  std::vector<OpTime> out;
  for (size_t o = 0; o < kNumOps; ++o) {
    for (size_t f = 0; f < kFusions; ++f) {
      for (size_t d = 0; d < kDTypes; ++d) {
        const uint64_t calls = timed_calls_[o][f][d];
        if (calls == 0) continue;
        out.push_back(OpTime{Op(o), int(f), DType(d), calls, seconds_[o][f][d], launches_[o][f][d],
                             transfers_[o][f][d]});
      }
    }
  }
  return out;
}

void FallbackBackend::ResetTimes() {
  timed_calls_ = {};
  seconds_ = {};
  launches_ = {};
  transfers_ = {};
}

Expected<std::unique_ptr<Buffer>> FallbackBackend::Allocate(uint64_t bytes,
                                                            const std::string& what) {
  ASSIGN_OR_RETURN(auto buf, device_->Allocate(bytes, what));
  if (device_->kind() == BackendKind::kCpu) return buf;  // recording only: no mirrors needed
  if (what == kExpertCacheBuffer) {  // device weights: no mirror
    slot_buffers_.insert(buf->base());
    return std::unique_ptr<Buffer>(new ForgetfulBuffer(
        std::move(buf), [this](void* base) { slot_buffers_.erase(base); }));
  }
  mirrors_[buf->base()] = Mirror{bytes, {}};
  return std::unique_ptr<Buffer>(
      new ForgetfulBuffer(std::move(buf), [this](void* base) { Forget(base); }));
}

Status FallbackBackend::ReserveForContext(const ContextShape& shape) {
  RETURN_IF_ERROR(cpu_->ReserveForContext(shape));
  return device_->ReserveForContext(shape);
}

Expected<Tensor> FallbackBackend::PrepareWeight(const TensorInfo& info) {
  ASSIGN_OR_RETURN(Tensor t, device_->PrepareWeight(info));
  if (device_->kind() != BackendKind::kCpu) {
    ASSIGN_OR_RETURN(Tensor host, cpu_->PrepareWeight(info));  // a view of the mmap
    weights_[t.base] = host;
  }
  return t;
}

Expected<Tensor> FallbackBackend::PrepareCpuWeight(const TensorInfo& info) {
  if (device_->kind() == BackendKind::kCpu) return device_->PrepareWeight(info);
  ASSIGN_OR_RETURN(Tensor t, cpu_->PrepareWeight(info));
  cpu_weights_.insert(t.base);
  return t;
}

void FallbackBackend::Embedding(const Tensor& table, std::span<const int32_t> ids,
                                const Tensor& out) {
  const OpScope op(*this, Op::kEmbedding, table.dtype);
  if (op.native) return device_->Embedding(table, ids, out);
  HostCall h(*this);
  cpu_->Embedding(h.In(table), ids, h.Out(out));
}

void FallbackBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const OpScope op(*this, Op::kRmsNorm, DType::kF32);
  if (op.native) return device_->RmsNorm(x, weight, eps, out);
  HostCall h(*this);
  const Tensor hx = h.In(x), hw = h.In(weight);
  cpu_->RmsNorm(hx, hw, eps, h.Out(out));
}

void FallbackBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias,
                             const Tensor& y) {
  const OpScope op(*this, Op::kMatmul, w.dtype);
  if (op.native) return device_->Matmul(x, w, bias, y);
  HostCall h(*this);
  const Tensor hx = h.In(x), hw = h.In(w);
  const Tensor hb = bias ? h.In(*bias) : Tensor{};
  cpu_->Matmul(hx, hw, bias ? &hb : nullptr, h.Out(y));
}

template <class T, class DTypeOf, class Each, class Whole>
void FallbackBackend::Fused(Op op, std::span<const T> items, const DTypeOf& dtype_of,
                            const Each& each, const Whole& whole) {
  if (items.empty()) return;
  bool all_native = true;
  for (const T& item : items) all_native = all_native && Native(op, dtype_of(item));
  if (!all_native) {
    for (const T& item : items) each(item);
    return;
  }
  for (size_t i = 1; i < items.size(); ++i) OnDevice(op, dtype_of(items[i]));
  const OpScope scope(*this, op, dtype_of(items[0]));
  whole();
}

void FallbackBackend::MultiMatmul(const Tensor& x, std::span<const Projection> projections) {
  Fused(
      Op::kMatmul, projections, [](const Projection& p) { return p.weight->dtype; },
      [&](const Projection& p) { Matmul(x, *p.weight, p.bias, p.out); },
      [&] { device_->MultiMatmul(x, projections); });
}

void FallbackBackend::FusedMatmul(const Tensor& x, std::span<const Projection> projections,
                                  const MatmulFusion& fusion) {
  if (projections.empty()) return;
  bool native = true;
  for (const Projection& p : projections) native = native && Native(Op::kMatmul, p.weight->dtype);
  if (fusion.norm) native = native && Native(Op::kRmsNorm, DType::kF32);
  if (fusion.swiglu) native = native && Native(Op::kSwiGlu, DType::kF32);
  if (fusion.residual) native = native && Native(Op::kAdd, DType::kF32);
  // A part on the CPU: the separate calls, each through this wrapper.
  if (!native) return Backend::FusedMatmul(x, projections, fusion);
  // Recorded as the separate calls would be; timed as one.
  if (fusion.norm) OnDevice(Op::kRmsNorm, DType::kF32);
  for (size_t i = 1; i < projections.size(); ++i) OnDevice(Op::kMatmul, projections[i].weight->dtype);
  if (fusion.swiglu) OnDevice(Op::kSwiGlu, DType::kF32);
  if (fusion.residual) OnDevice(Op::kAdd, DType::kF32);
  const int parts = (fusion.norm ? kNormBefore : 0) | (fusion.swiglu ? kSwiGluAfter : 0) |
                    (fusion.residual ? kAddAfter : 0);
  const OpScope scope(*this, Op::kMatmul, projections[0].weight->dtype, parts);
  device_->FusedMatmul(x, projections, fusion);
}

void FallbackBackend::StepAttention(const AttentionStep& step) {
  if (!Native(Op::kRope, DType::kF32) || !Native(Op::kScatterRows, DType::kF32) ||
      !Native(Op::kAttention, DType::kF32)) {
    return Backend::StepAttention(step);
  }
  OnDevice(Op::kRope, DType::kF32);
  OnDevice(Op::kRope, DType::kF32);
  for (size_t i = 0; i < step.segments.size(); ++i) {
    OnDevice(Op::kScatterRows, DType::kF32);
    OnDevice(Op::kScatterRows, DType::kF32);
    if (i > 0) OnDevice(Op::kAttention, DType::kF32);
  }
  const OpScope scope(*this, Op::kAttention, DType::kF32, kRopeAndCacheWrite);
  device_->StepAttention(step);
}

void FallbackBackend::Rope(const Tensor& x, std::span<const int32_t> positions,
                           const RopeTable& rope) {
  const OpScope op(*this, Op::kRope, DType::kF32);
  if (op.native) return device_->Rope(x, positions, rope);
  HostCall h(*this);
  cpu_->Rope(h.Out(x), positions, rope);
}

void FallbackBackend::Attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                const Tensor& out) {
  const OpScope op(*this, Op::kAttention, DType::kF32);
  if (op.native) {
    return device_->Attention(q, k_pool, v_pool, key_rows, n_past, scale, out);
  }
  HostCall h(*this);
  const Tensor hq = h.In(q), hk = h.In(k_pool), hv = h.In(v_pool);
  cpu_->Attention(hq, hk, hv, key_rows, n_past, scale, h.Out(out));
}

void FallbackBackend::MultiAttention(std::span<const AttentionJob> jobs, float scale) {
  Fused(
      Op::kAttention, jobs, [](const AttentionJob&) { return DType::kF32; },
      [&](const AttentionJob& j) {
        Attention(j.q, *j.k_pool, *j.v_pool, j.key_rows, j.n_past, scale, j.out);
      },
      [&] { device_->MultiAttention(jobs, scale); });
}

void FallbackBackend::LatentAttention(const Tensor& q, const Tensor& pool, int64_t latent_dim,
                                      std::span<const int32_t> key_rows, int64_t n_past,
                                      float scale, const KeySelection* selection,
                                      const Tensor& out) {
  const OpScope op(*this, Op::kLatentAttention, DType::kF32);
  if (op.native) {
    return device_->LatentAttention(q, pool, latent_dim, key_rows, n_past, scale, selection, out);
  }
  HostCall h(*this);
  const Tensor hq = h.In(q), hp = h.In(pool);
  cpu_->LatentAttention(hq, hp, latent_dim, key_rows, n_past, scale, selection, h.Out(out));
}

void FallbackBackend::HeadMatmul(const Tensor& x, int64_t x_stride, const Tensor& w,
                                 const Tensor& y, int64_t y_stride) {
  const OpScope op(*this, Op::kHeadMatmul, DType::kF32);
  if (op.native) {
    return device_->HeadMatmul(x, x_stride, w, y, y_stride);
  }
  HostCall h(*this);
  const Tensor hx = h.In(x), hw = h.In(w);
  cpu_->HeadMatmul(hx, x_stride, hw, h.Out(y), y_stride);
}

void FallbackBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                                  int64_t dst_col, int64_t n) {
  const OpScope op(*this, Op::kCopyColumns, DType::kF32);
  if (op.native) {
    return device_->CopyColumns(src, src_col, dst, dst_col, n);
  }
  HostCall h(*this);
  const Tensor hs = h.In(src);
  cpu_->CopyColumns(hs, src_col, h.Out(dst), dst_col, n);
}

void FallbackBackend::IndexerTopK(const Tensor& q, const Tensor& pool, const Tensor& head_weights,
                                  std::span<const int32_t> key_rows, int64_t n_past, float scale,
                                  int64_t topk, std::span<int32_t> selection,
                                  std::span<int32_t> counts) {
  const OpScope op(*this, Op::kIndexerTopK, DType::kF32);
  if (op.native) {
    return device_->IndexerTopK(q, pool, head_weights, key_rows, n_past, scale, topk, selection,
                                counts);
  }
  HostCall h(*this);
  cpu_->IndexerTopK(h.In(q), h.In(pool), h.In(head_weights), key_rows, n_past, scale, topk,
                    selection, counts);
}

void FallbackBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                float eps, const Tensor& out) {
  const OpScope op(*this, Op::kLayerNorm, DType::kF32);
  if (op.native) return device_->LayerNorm(x, weight, bias, eps, out);
  HostCall h(*this);
  const Tensor hx = h.In(x), hw = h.In(weight), hb = h.In(bias);
  cpu_->LayerNorm(hx, hw, hb, eps, h.Out(out));
}

void FallbackBackend::Route(const Tensor& logits, const Tensor* selection_bias,
                            const RouterSpec& spec, std::span<int32_t> ids,
                            std::span<float> weights) {
  const OpScope op(*this, Op::kRoute, DType::kF32);
  if (op.native) {
    return device_->Route(logits, selection_bias, spec, ids, weights);
  }
  HostCall h(*this);
  const Tensor hb = selection_bias ? h.In(*selection_bias) : Tensor{};
  cpu_->Route(h.In(logits), selection_bias ? &hb : nullptr, spec, ids, weights);
}

void FallbackBackend::GroupedMatmul(const Tensor& x, std::span<const Tensor> weights,
                                    std::span<const int32_t> offsets, const Tensor& y) {
  const OpScope op(*this, Op::kGroupedMatmul, weights.empty() ? DType::kF32 : weights[0].dtype,
                   kPlain, OnCpu(weights));
  if (op.native || InDeviceSlots(weights)) {
    return device_->GroupedMatmul(x, weights, offsets, y);
  }
  HostCall h(*this);
  std::vector<Tensor> hw;  // weights are views of the mmap or CPU weights: no copies
  hw.reserve(weights.size());
  for (const Tensor& w : weights) hw.push_back(h.In(w));
  const Tensor hx = h.In(x);
  cpu_->GroupedMatmul(hx, hw, offsets, h.Out(y));
}

void FallbackBackend::MultiGroupedMatmul(const Tensor& x,
                                         std::span<const GroupedProjection> projections,
                                         std::span<const int32_t> offsets) {
  if (!projections.empty() && OnCpu(projections[0].weights)) {  // --cpu-moe: the CPU's own
    for (const GroupedProjection& p : projections) GroupedMatmul(x, p.weights, offsets, p.out);
    return;
  }
  if (!projections.empty() && InDeviceSlots(projections[0].weights) &&
      !Native(Op::kGroupedMatmul, projections[0].weights[0].dtype)) {
    for (const GroupedProjection& p : projections) GroupedMatmul(x, p.weights, offsets, p.out);
    return;
  }
  Fused(
      Op::kGroupedMatmul, projections,
      [](const GroupedProjection& p) {
        return p.weights.empty() ? DType::kF32 : p.weights[0].dtype;
      },
      [&](const GroupedProjection& p) { GroupedMatmul(x, p.weights, offsets, p.out); },
      [&] { device_->MultiGroupedMatmul(x, projections, offsets); });
}

void FallbackBackend::ScatterRows(const Tensor& src, std::span<const int32_t> rows,
                                  const Tensor& dst) {
  const OpScope op(*this, Op::kScatterRows, DType::kF32);
  if (op.native) return device_->ScatterRows(src, rows, dst);
  HostCall h(*this);
  const Tensor hs = h.In(src);
  cpu_->ScatterRows(hs, rows, h.Out(dst));
}

void FallbackBackend::GatherRows(const Tensor& src, std::span<const int32_t> rows,
                                 const Tensor& dst) {
  const OpScope op(*this, Op::kGatherRows, DType::kF32);
  if (op.native) return device_->GatherRows(src, rows, dst);
  HostCall h(*this);
  const Tensor hs = h.In(src);
  cpu_->GatherRows(hs, rows, h.Out(dst));
}

void FallbackBackend::ScatterAddRows(const Tensor& src, std::span<const int32_t> rows,
                                     std::span<const float> scales, const Tensor& dst) {
  const OpScope op(*this, Op::kScatterAddRows, DType::kF32);
  if (op.native) {
    return device_->ScatterAddRows(src, rows, scales, dst);
  }
  HostCall h(*this);
  const Tensor hs = h.In(src);
  cpu_->ScatterAddRows(hs, rows, scales, h.Out(dst));
}

void FallbackBackend::Zero(const Tensor& t) {
  const OpScope op(*this, Op::kZero, DType::kF32);
  if (op.native) return device_->Zero(t);
  HostCall h(*this);
  cpu_->Zero(h.Out(t));
}

void FallbackBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const OpScope op(*this, Op::kSwiGlu, DType::kF32);
  if (op.native) return device_->SwiGlu(gate, up, out);
  HostCall h(*this);
  const Tensor hg = h.In(gate), hu = h.In(up);
  cpu_->SwiGlu(hg, hu, h.Out(out));
}

void FallbackBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  const OpScope op(*this, Op::kAdd, DType::kF32);
  if (op.native) return device_->Add(a, b, out);
  HostCall h(*this);
  const Tensor ha = h.In(a), hb = h.In(b);
  cpu_->Add(ha, hb, h.Out(out));
}

void FallbackBackend::ReadF32(const Tensor& src, std::span<float> dst) {
  if (weights_.count(src.base) == 0) return device_->ReadF32(src, dst);
  HostCall h(*this);
  cpu_->ReadF32(h.In(src), dst);
}

void FallbackBackend::Copy(const Tensor& src, const Tensor& dst) {
  const OpScope op(*this, Op::kCopy, src.dtype);
  if (op.native) return device_->Copy(src, dst);
  HostCall h(*this);
  const Tensor hs = h.In(src);
  cpu_->Copy(hs, h.Out(dst));
}

}  // namespace anymoe
