// DeviceBackend's memory and transfers: the reservation from the memory plan,
// regions of the arena as Buffers, weight upload, host readback.
#include "backends/device/device_backend.h"

#include <algorithm>

#include "backends/device/kernel_args.h"
#include "backends/device/memory_budget.h"
#include "backends/host_weight.h"
#include "formats/tensor_source.h"

namespace anymoe::device {

// A region of the arena, returned to it when the Buffer goes.
class DeviceBackend::ArenaBuffer final : public Buffer {
 public:
  ArenaBuffer(DeviceArena& arena, Region r, uint64_t size) : arena_(arena), r_(r), size_(size) {}
  ~ArenaBuffer() override { arena_.Free(r_); }
  void* base() override { return r_.handle; }
  uint64_t size() const override { return size_; }

 private:
  DeviceArena& arena_;
  Region r_;
  uint64_t size_;
};

bool DeviceSupports(Op op, DType dtype, bool runs_weight) {
  switch (op) {
    case Op::kEmbedding:
    case Op::kMatmul:
    case Op::kGroupedMatmul:
      return runs_weight;
    default:
      return dtype == DType::kF32;
  }
}

bool KernelsDecodeWeight(DType d) {
  switch (d) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ4_XS:
    case DType::kMXFP4:
    case DType::kF8_E4M3:  // with or without block scales (Tensor::scales)
    case DType::kF8_E5M2:
      return true;
    default:
      return false;
  }
}

DeviceBackend::DeviceBackend(std::unique_ptr<DeviceRuntime> rt, DeviceTraits traits,
                             const BackendOptions& options)
    : rt_(std::move(rt)),
      traits_(std::move(traits)),
      options_(options),
      arena_(*rt_, traits_.name),
      ring_(*rt_) {}

DeviceBackend::~DeviceBackend() {
  owned_.clear();
  if (ring_region_.handle != nullptr) arena_.Free(ring_region_);
  if (scratch_region_.handle != nullptr) arena_.Free(scratch_region_);
}

bool DeviceBackend::Supports(Op op, DType dtype) const {
  return DeviceSupports(op, dtype, RunsWeight(dtype));
}

DeviceInfo DeviceBackend::device() const {
  return DeviceInfo{rt_->device_name(), rt_->device_memory(), arena_.capacity(),
                    ring_region_.size + scratch_region_.size, arena_.allocations()};
}

uint64_t DeviceBackend::Needed(const MemoryPlan& plan, std::string* breakdown) const {
  const uint64_t staging = StagingBytes(plan);
  const uint64_t scratch = scratch_region_.handle == nullptr ? traits_.scratch_bytes : 0;
  // Each region is rounded up to the alignment; the ring and the scratch are two more.
  const uint64_t slack = (plan.buffers + 3) * arena_.Aligned(1);
  if (breakdown != nullptr) {
    *breakdown = "weights " + BytesText(plan.weights) + ", KV cache for " +
                 std::to_string(plan.kv_tokens) + " tokens " + BytesText(plan.kv_cache) +
                 ", activations " + BytesText(plan.activations) + ", staging " +
                 BytesText(staging);
    if (plan.expert_cache > 0) *breakdown += ", expert cache " + BytesText(plan.expert_cache);
    if (scratch > 0) *breakdown += ", " + traits_.scratch_what + " " + BytesText(scratch);
    *breakdown += ", alignment " + BytesText(slack);
  }
  return plan.total() + staging + scratch + slack;
}

uint64_t DeviceBackend::DeviceBytesFor(const MemoryPlan& plan) const {
  return Needed(plan, nullptr);
}

Status DeviceBackend::ReserveMemory(const MemoryPlan& plan) {
  const uint64_t staging = StagingBytes(plan);
  const uint64_t scratch = scratch_region_.handle == nullptr ? traits_.scratch_bytes : 0;
  std::string breakdown;
  const uint64_t needed = Needed(plan, &breakdown);
  const uint64_t budget = options_.mem_budget > 0 ? options_.mem_budget : needed;
  const std::string prefix = traits_.name + ": the model needs ";
  if (budget < needed) {
    return Status::Error(prefix + BytesText(needed) + " of device memory (" + breakdown +
                         ") but --mem-budget allows " + BytesText(budget));
  }
  const uint64_t available = rt_->available_memory();
  if (budget > available) {
    return Status::Error(prefix + BytesText(budget) + " of device memory (" + breakdown + ") but " +
                         rt_->device_name() + " has " + BytesText(available) + " available");
  }
  RETURN_IF_ERROR(arena_.Reserve(budget));
  if (ring_region_.size < staging) {  // a later model may need a larger ring
    if (ring_region_.handle != nullptr) arena_.Free(ring_region_);
    ASSIGN_OR_RETURN(ring_region_, arena_.Carve(staging, "staging"));
    ring_.Bind(ring_region_.handle, ring_region_.size);
    RETURN_IF_ERROR(rt_->BindStaging(ring_region_.handle, ring_region_.size));
  }
  if (scratch > 0) {
    ASSIGN_OR_RETURN(scratch_region_, arena_.Carve(scratch, traits_.scratch_what));
    RETURN_IF_ERROR(UseScratch(scratch_region_));
  }
  max_kv_tokens_ = std::max(max_kv_tokens_, plan.kv_tokens);
  return Status::Ok();
}

Expected<std::unique_ptr<Buffer>> DeviceBackend::Allocate(uint64_t bytes, const std::string& what) {
  ASSIGN_OR_RETURN(Region r, arena_.Carve(std::max<uint64_t>(bytes, 4), what));
  return std::unique_ptr<Buffer>(new ArenaBuffer(arena_, r, bytes));
}

Status DeviceBackend::ReserveForContext(const ContextShape& shape) {
  if (shape.max_keys > max_kv_tokens_) {
    return Status::Error(traits_.name + ": a cache of " + std::to_string(shape.max_keys) +
                         " tokens exceeds the " + std::to_string(max_kv_tokens_) +
                         " planned at load");
  }
  return Status::Ok();
}

Expected<Tensor> DeviceBackend::PrepareWeight(const TensorInfo& info) {
  ASSIGN_OR_RETURN(HostWeight w, PrepareHostWeight(info));
  ASSIGN_OR_RETURN(auto buf, Allocate(w.bytes, "weight " + info.name));
  rt_->Write(buf->base(), 0, w.tensor.base, w.bytes);
  w.tensor.base = buf->base();
  owned_.push_back(std::move(buf));
  if (w.tensor.scales) {
    // An FP8 weight's block scales go up beside it, a buffer of their own
    // that the kernels index.
    const uint64_t bytes = w.tensor.scales.GridBytes(w.tensor.rows(), w.tensor.cols());
    ASSIGN_OR_RETURN(auto scales, Allocate(bytes, "scales of " + info.name));
    rt_->Write(scales->base(), 0, w.tensor.scales.data, bytes);
    w.tensor.scales.data = scales->base();
    owned_.push_back(std::move(scales));
  }
  return w.tensor;
}

void DeviceBackend::ReadBytes(const Tensor& src, uint64_t bytes, void* dst) {
  if (bytes > 0) rt_->Read(src.base, src.offset, dst, bytes);
}

void DeviceBackend::ReadF32(const Tensor& src, std::span<float> dst) {
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
  if (!src.scales) return;
  // FP8: the grid rows of these rows, read back and applied.
  const WeightScales s = ScalesOf(src);
  const int64_t grid_row0 = s.first_row / s.block_rows;
  const int64_t grid_rows = (s.first_row + src.rows() - 1) / s.block_rows - grid_row0 + 1;
  std::vector<uint8_t> grid(uint64_t(grid_rows * s.grid_cols) * sizeof(float));
  rt_->Read(s.buffer, s.grid_offset + uint64_t(grid_row0 * s.grid_cols) * sizeof(float),
            grid.data(), grid.size());
  ApplyBlockScales(grid.data(), src.scales, s.first_row - grid_row0 * s.block_rows, src.rows(),
                   src.cols(), dst.data());
}

void DeviceBackend::WriteF32(std::span<const float> src, const Tensor& dst) {
  CHECK(dst.dtype == DType::kF32 && uint64_t(dst.elements()) == src.size());
  if (src.empty()) return;
  rt_->Write(dst.base, dst.offset, src.data(), src.size_bytes());
}

void DeviceBackend::WriteBytes(const void* src, uint64_t bytes, const Tensor& dst) {
  // From the expert cache's I/O threads: one upload at a time; the queue
  // orders it after the ops already enqueued (which may still read the slot's
  // previous expert) and before those enqueued after it returns.
  const std::lock_guard<std::mutex> lock(write_mu_);
  if (bytes > 0) rt_->Write(dst.base, dst.offset, src, bytes);
}

void DeviceBackend::Synchronize() { rt_->Finish(); }

}  // namespace anymoe::device
