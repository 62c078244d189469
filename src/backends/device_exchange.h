// Exchanges between the devices of an MPI job's ranks that keep the data on
// the devices (NCCL between CUDA ranks). Expert parallelism uses it where a
// backend has one (Backend::device_exchange) and exchanges through host memory
// otherwise. The job itself (who the ranks are, how the joining id travels)
// is the distributed layer's: this interface only takes the id's bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace anymoe {

class DeviceExchange {
 public:
  virtual ~DeviceExchange() = default;

  // Bytes of the id that rank 0 creates and every rank joins with.
  virtual uint64_t job_id_bytes() const = 0;
  // On rank 0: a new id (ncclGetUniqueId).
  virtual Expected<std::vector<uint8_t>> NewJobId() = 0;
  // Every rank with the same id, within `timeout_s`: an error, not a hang,
  // when a rank never joins.
  virtual Status Join(std::span<const uint8_t> job_id, int rank, int ranks, double timeout_s) = 0;
  virtual bool joined() const = 0;
  // Leaves the exchange (when another rank could not join): joined() is then false.
  virtual void Leave() = 0;

  // All-gather of f32 values within `buffer` (device memory): rank r's
  // counts[r] values at displs[r], this rank's block already in place. Starts
  // after the work queued so far and runs beside the work queued after it;
  // Finish waits for it. One at a time.
  virtual Status StartAllgatherv(const Tensor& buffer, std::span<const int> counts,
                                 std::span<const int> displs) = 0;
  // Waits at most `timeout_s`; a rank that died or hangs gives an error (the
  // exchange is then aborted and every later call answers that error).
  virtual Status Finish(double timeout_s) = 0;
};

}  // namespace anymoe
