// Where cached experts live: a fixed number of slots, each holding one routed
// expert's gate, up and down matrices as the backend's ops read them. The CPU
// keeps slots in host memory (HostExpertSlots). A device backend's arena can
// host the same slots: its store hands the I/O threads a host staging buffer
// per worker and Commit uploads the bytes into the slot's arena range; the
// cache's bookkeeping, I/O and prefetch stay as they are.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "models/experts/expert_layout.h"

namespace anymoe {

class ExpertSlotStore {
 public:
  virtual ~ExpertSlotStore() = default;
  virtual int64_t slots() const = 0;
  virtual uint64_t bytes() const = 0;  // memory the slots (and staging) take
  // Host memory I/O worker `worker` reads matrix `part` of slot `slot` into:
  // ExpertReader::kAlign-aligned, ExpertReader::Capacity(the largest part) bytes.
  virtual uint8_t* ReadBuffer(int32_t slot, int part, int worker) = 0;
  // Makes the bytes read (the matrix starts at ReadBuffer(...) + shift) the
  // slot's `part`, and returns the view the ops read it through, with
  // `scales` (an FP8 expert's block scales from its first row, host memory;
  // empty: none) where that memory's ops find them. Called on the I/O
  // worker's thread while the slot is pinned.
  virtual Tensor Commit(int32_t slot, int part, const ExpertMatrix& m, const BlockScales& scales,
                        uint64_t shift, int worker) = 0;
};

// Host memory slots for the CPU backend, in huge pages. `pack`: store q8_0 /
// q4_0 / q4_1 matrices in the panel layout of the VNNI kernels (packed by the
// I/O thread from a staging buffer), where the machine has those kernels; else
// the file's bytes are read straight into the slot.
Expected<std::unique_ptr<ExpertSlotStore>> NewHostExpertSlots(
    int64_t slots, const std::array<uint64_t, kExpertParts>& part_bytes, bool pack, int workers);

// Device memory slots (a device backend's hot-expert cache): per part (gate,
// up, down) one buffer of `slots` matrices from backend.Allocate, so a grouped
// call over cached experts is one launch on backends that need its experts in
// one buffer. The I/O threads read into host staging (one per worker) and
// Commit uploads with Backend::WriteBytes; ops then read the slot as a device
// weight with the file's bytes, so results are those of resident experts.
// bytes() is device memory; the host staging is apart.
Expected<std::unique_ptr<ExpertSlotStore>> NewDeviceExpertSlots(
    Backend& backend, int64_t slots, const std::array<uint64_t, kExpertParts>& part_bytes,
    int workers);
// Where a device slot keeps an FP8 part's block-scale grid: after the matrix,
// 16-byte aligned; and what the part then takes.
inline uint64_t DeviceSlotScaleOffset(const ExpertMatrix& m) { return (m.bytes + 15) / 16 * 16; }
inline uint64_t DeviceSlotPartBytes(const ExpertMatrix& m) {
  return m.scale_bytes > 0 ? DeviceSlotScaleOffset(m) + m.scale_bytes : m.bytes;
}
// Device bytes one slot takes for parts of `part_bytes` (DeviceSlotPartBytes,
// each rounded up to kDeviceSlotAlign within its buffer).
inline constexpr uint64_t kDeviceSlotAlign = 256;
uint64_t DeviceSlotBytes(const std::array<uint64_t, kExpertParts>& part_bytes);

}  // namespace anymoe
