// Device memory expert slots (see expert_slot_store.h): the hot-expert cache of
// a device backend. The cache, its eviction, I/O and prefetch are the host
// cache's; only where a slot's bytes end up differs, so OpenCL and CUDA (and
// any later device backend) get it through the Backend interface alone.
#include <algorithm>
#include <cstdlib>

#include "models/experts/expert_reader.h"
#include "models/experts/expert_slot_store.h"

namespace anymoe {
namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

class DeviceExpertSlots final : public ExpertSlotStore {
 public:
  DeviceExpertSlots(Backend& backend, int64_t slots,
                    const std::array<uint64_t, kExpertParts>& part_bytes, int workers)
      : backend_(backend), slots_(slots), workers_(workers) {
    for (int p = 0; p < kExpertParts; ++p) {
      stride_[size_t(p)] = RoundUp(std::max<uint64_t>(part_bytes[size_t(p)], 1), kDeviceSlotAlign);
    }
    staging_bytes_ = RoundUp(
        ExpertReader::Capacity(std::max({part_bytes[0], part_bytes[1], part_bytes[2]})),
        ExpertReader::kAlign);
  }
  ~DeviceExpertSlots() override { std::free(staging_); }

  Status Allocate() {
    for (int p = 0; p < kExpertParts; ++p) {
      ASSIGN_OR_RETURN(buffers_[size_t(p)],
                       backend_.Allocate(uint64_t(slots_) * stride_[size_t(p)],
                                         Backend::kExpertCacheBuffer));
    }
    staging_ = static_cast<uint8_t*>(
        std::aligned_alloc(ExpertReader::kAlign, uint64_t(workers_) * staging_bytes_));
    if (staging_ == nullptr) {
      return Status::Error("device expert cache: cannot allocate " +
                           std::to_string(uint64_t(workers_) * staging_bytes_) +
                           " bytes of host staging");
    }
    return Status::Ok();
  }

  int64_t slots() const override { return slots_; }
  uint64_t bytes() const override {
    return uint64_t(slots_) * (stride_[0] + stride_[1] + stride_[2]);
  }

  uint8_t* ReadBuffer(int32_t, int, int worker) override {
    return staging_ + uint64_t(worker) * staging_bytes_;
  }

  Tensor Commit(int32_t slot, int part, const ExpertMatrix& m, const BlockScales& scales,
                uint64_t shift, int worker) override {
    Tensor t = Tensor::Of(buffers_[size_t(part)]->base(), m.dtype, {m.rows, m.cols});
    t.offset = uint64_t(slot) * stride_[size_t(part)];
    backend_.WriteBytes(ReadBuffer(slot, part, worker) + shift, m.bytes, t);
    if (scales) {  // the grid follows the matrix in the slot
      CHECK(m.scale_bytes > 0);
      Tensor grid = t;
      grid.offset += DeviceSlotScaleOffset(m);
      backend_.WriteBytes(scales.data, m.scale_bytes, grid);
      t.scales = BlockScales{t.base, scales.rows, scales.cols, grid.offset, t.offset};
    }
    return t;
  }

 private:
  Backend& backend_;
  int64_t slots_;
  int workers_;
  std::array<uint64_t, kExpertParts> stride_{};
  std::array<std::unique_ptr<Buffer>, kExpertParts> buffers_;
  uint64_t staging_bytes_ = 0;
  uint8_t* staging_ = nullptr;  // one read buffer per I/O worker
};

}  // namespace

uint64_t DeviceSlotBytes(const std::array<uint64_t, kExpertParts>& part_bytes) {
  uint64_t bytes = 0;
  for (uint64_t p : part_bytes) bytes += RoundUp(std::max<uint64_t>(p, 1), kDeviceSlotAlign);
  return bytes;
}

Expected<std::unique_ptr<ExpertSlotStore>> NewDeviceExpertSlots(
    Backend& backend, int64_t slots, const std::array<uint64_t, kExpertParts>& part_bytes,
    int workers) {
  auto store = std::make_unique<DeviceExpertSlots>(backend, slots, part_bytes, workers);
  RETURN_IF_ERROR(store->Allocate());
  return std::unique_ptr<ExpertSlotStore>(std::move(store));
}

}  // namespace anymoe
