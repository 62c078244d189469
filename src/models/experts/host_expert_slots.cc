// Host memory expert slots (see expert_slot_store.h).
#include <algorithm>
#include <cstring>

#include "backends/cpu/huge_page_arena.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "models/experts/expert_reader.h"
#include "models/experts/expert_slot_store.h"

namespace anymoe {
namespace {

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

class HostExpertSlots final : public ExpertSlotStore {
 public:
  HostExpertSlots(int64_t slots, const std::array<uint64_t, kExpertParts>& part_bytes, bool pack,
                  int workers)
      : slots_(slots), pack_(pack) {
    uint64_t at = 0;
    for (int p = 0; p < kExpertParts; ++p) {
      part_offset_[size_t(p)] = at;
      at += RoundUp(ExpertReader::Capacity(part_bytes[size_t(p)]), ExpertReader::kAlign);
    }
    slot_bytes_ = at;
    staging_bytes_ =
        pack ? RoundUp(
                   ExpertReader::Capacity(std::max({part_bytes[0], part_bytes[1], part_bytes[2]})),
                   ExpertReader::kAlign)
             : 0;
    bytes_ = uint64_t(slots) * slot_bytes_ + uint64_t(workers) * staging_bytes_;
    workers_ = workers;
  }
  ~HostExpertSlots() override {
    if (base_ != nullptr) cpu::UnmapHugePages(base_, bytes_);
  }

  Status Map() {
    base_ = cpu::MapHugePages(bytes_);
    if (base_ == nullptr) {
      return Status::Error("expert cache: cannot allocate " + std::to_string(bytes_) + " bytes");
    }
    return Status::Ok();
  }

  int64_t slots() const override { return slots_; }
  uint64_t bytes() const override { return bytes_; }

  uint8_t* ReadBuffer(int32_t slot, int part, int worker) override {
    if (pack_) return base_ + uint64_t(slots_) * slot_bytes_ + uint64_t(worker) * staging_bytes_;
    return Part(slot, part);
  }

  Tensor Commit(int32_t slot, int part, const ExpertMatrix& m, const BlockScales& scales,
                uint64_t shift, int worker) override {
    Tensor t = Tensor::Of(nullptr, m.dtype, {m.rows, m.cols});
    t.scales = scales;  // host memory already, the view's row 0 its first
    uint8_t* dst = Part(slot, part);
    if (pack_ && Packable(m)) {
      kernels::PackPanels(m.dtype, ReadBuffer(slot, part, worker) + shift, m.rows, m.cols, dst);
      t.base = dst;
      t.panels = dst;  // the integer kernels read only the panels
    } else if (pack_) {
      std::memcpy(dst, ReadBuffer(slot, part, worker) + shift, m.bytes);
      t.base = dst;
    } else {
      t.base = dst + shift;
    }
    return t;
  }

 private:
  static bool Packable(const ExpertMatrix& m) {
    return kernels::HasPanelKernels(m.dtype) && m.rows % kernels::kPanelRows == 0;
  }
  uint8_t* Part(int32_t slot, int part) {
    return base_ + uint64_t(slot) * slot_bytes_ + part_offset_[size_t(part)];
  }

  int64_t slots_;
  bool pack_;
  int workers_ = 1;
  std::array<uint64_t, kExpertParts> part_offset_{};
  uint64_t slot_bytes_ = 0, staging_bytes_ = 0, bytes_ = 0;
  uint8_t* base_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<ExpertSlotStore>> NewHostExpertSlots(
    int64_t slots, const std::array<uint64_t, kExpertParts>& part_bytes, bool pack, int workers) {
  auto store = std::make_unique<HostExpertSlots>(slots, part_bytes, pack, workers);
  RETURN_IF_ERROR(store->Map());
  return std::unique_ptr<ExpertSlotStore>(std::move(store));
}

}  // namespace anymoe
