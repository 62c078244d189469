// What a device backend's runtime gives the shared device layer: its memory
// (chunks allocated once at load, handles for regions of them), the copies
// between host and device, and the queue it orders work on. OpenCL's ClRuntime
// and CUDA's CudaDevice implement it; the layer (DeviceArena, StagingRing,
// DeviceBackend) does everything else once. The public calls count what they
// enqueue, so `anymoe bench --op-profile` can report launches per op.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "backends/device_exchange.h"
#include "core/status.h"

namespace anymoe::device {

class DeviceRuntime {
 public:
  DeviceRuntime() = default;
  virtual ~DeviceRuntime() = default;
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  // ---- the device
  virtual std::string device_name() const = 0;
  virtual uint64_t device_memory() const = 0;     // global memory, bytes
  virtual uint64_t available_memory() const = 0;  // what a reservation may take now
  virtual uint64_t alignment() const = 0;         // of every region (a power of two)
  virtual uint64_t max_chunk_bytes() const { return UINT64_MAX; }

  // ---- memory, at load only (DeviceArena is the one caller)
  virtual Expected<void*> NewChunk(uint64_t bytes) = 0;
  virtual void DeleteChunk(void* chunk) = 0;
  // What Tensor::base holds for bytes [offset, offset + bytes) of a chunk: a
  // device address (CUDA) or a sub-buffer (OpenCL), released by ReleaseRegion.
  virtual void* Region(void* chunk, uint64_t offset, uint64_t bytes) = 0;
  virtual void ReleaseRegion(void* region) {}
  // Called when the staging ring is (re)bound to `bytes` at `region` (CUDA
  // pins a host twin of it here).
  virtual Status BindStaging(void* region, uint64_t bytes) { return Status::Ok(); }

  // ---- transfers (each counted)
  // Host -> device, done when it returns (weights at load, WriteF32).
  void Write(void* base, uint64_t offset, const void* src, uint64_t bytes) {
    ++transfers_;
    DoWrite(base, offset, src, bytes);
  }
  // Device -> host after the work queued so far, done when it returns.
  void Read(const void* base, uint64_t offset, void* dst, uint64_t bytes) {
    ++transfers_;
    DoRead(base, offset, dst, bytes);
  }
  // Host -> the staging ring, ordered before every later launch; `src` may be
  // reused when it returns.
  void Stage(void* ring, uint64_t offset, const void* src, uint64_t bytes) {
    ++transfers_;
    DoStage(ring, offset, src, bytes);
  }

  // ---- device work (each counted as a launch)
  void FillZero(void* base, uint64_t offset, uint64_t bytes) {
    ++launches_;
    DoFillZero(base, offset, bytes);
  }
  // The ranges do not overlap.
  void Copy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset, uint64_t bytes) {
    ++launches_;
    DoCopy(src, src_offset, dst, dst_offset, bytes);
  }
  // Waits until every queued command has run.
  virtual void Finish() = 0;
  // Exchanges with other ranks' devices (Backend::device_exchange); null if none.
  virtual DeviceExchange* exchange() { return nullptr; }

  // Kernel launchers call this for every kernel they enqueue.
  void CountLaunch() { ++launches_; }
  uint64_t launches() const { return launches_.load(std::memory_order_relaxed); }
  uint64_t transfers() const { return transfers_.load(std::memory_order_relaxed); }

 protected:
  virtual void DoWrite(void* base, uint64_t offset, const void* src, uint64_t bytes) = 0;
  virtual void DoRead(const void* base, uint64_t offset, void* dst, uint64_t bytes) = 0;
  virtual void DoStage(void* ring, uint64_t offset, const void* src, uint64_t bytes) = 0;
  virtual void DoFillZero(void* base, uint64_t offset, uint64_t bytes) = 0;
  virtual void DoCopy(const void* src, uint64_t src_offset, void* dst, uint64_t dst_offset,
                      uint64_t bytes) = 0;

 private:
  // Atomic: the device expert cache's I/O threads write while ops launch.
  std::atomic<uint64_t> launches_{0}, transfers_{0};
};

}  // namespace anymoe::device
