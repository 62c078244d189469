// DeviceExchange over NCCL: the all-gather of expert parallelism between CUDA
// ranks, device memory to device memory, on a stream of its own so the
// compute stream runs on (the shared expert) while the rows travel. Built
// when the CUDA backend finds NCCL (ANYMOE_HAVE_NCCL).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "backends/cuda/cuda_device.h"
#include "backends/device_exchange.h"

namespace anymoe::cuda {

class NcclExchange final : public DeviceExchange {
 public:
  explicit NcclExchange(CudaDevice& device) : device_(device) {}
  ~NcclExchange() override;

  uint64_t job_id_bytes() const override { return sizeof(ncclUniqueId); }
  Expected<std::vector<uint8_t>> NewJobId() override;
  Status Join(std::span<const uint8_t> job_id, int rank, int ranks, double timeout_s) override;
  bool joined() const override { return comm_ != nullptr && failure_.empty(); }
  void Leave() override;
  Status StartAllgatherv(const Tensor& buffer, std::span<const int> counts,
                         std::span<const int> displs) override;
  Status Finish(double timeout_s) override;

 private:
  // Polls `done` and the communicator's asynchronous error until `done`
  // answers true or `timeout_s` passed; on an error or the timeout the
  // communicator is aborted (a peer may be dead) and the failure kept.
  template <typename Done>
  Status Poll(Done done, double timeout_s, const char* what);
  Status Fail(std::string message);

  CudaDevice& device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the exchanges'
  cudaEvent_t ready_ = nullptr;    // the compute work before an exchange, done
  int rank_ = 0, ranks_ = 1;
  bool pending_ = false;
  std::string failure_;
};

}  // namespace anymoe::cuda
