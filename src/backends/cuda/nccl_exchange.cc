// Compiled into the CUDA plugin only where backend.cmake found NCCL (the
// plugin's sources are globbed).
#ifdef ANYMOE_HAVE_NCCL
#include "backends/cuda/nccl_exchange.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "backends/cuda/cuda_check.h"
#include "core/check.h"

namespace anymoe::cuda {

namespace {

std::string NcclText(ncclResult_t r) { return ncclGetErrorString(r); }

// As Communicator's failures: the job cannot go on, a server answers 503.
Status Unavailable(std::string message) {
  return Status::Error(std::move(message), ErrorKind::kUnavailable, "expert_parallel_failure");
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", s);
  return text;
}

}  // namespace

Status NcclExchange::Fail(std::string message) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // the queued exchanges may never finish: stop them
    comm_ = nullptr;
  }
  failure_ = message;
  return Unavailable(std::move(message));
}

template <typename Done>
Status NcclExchange::Poll(Done done, double timeout_s, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      return Fail("nccl: rank " + std::to_string(rank_) + " of " + std::to_string(ranks_) + ": " +
                  what + " failed: " + NcclText(r != ncclSuccess ? r : state));
    }
    if (state == ncclSuccess && done()) return Status::Ok();
    const auto now = Clock::now();
    if (now >= deadline) {
      return Fail("nccl: rank " + std::to_string(rank_) + " of " + std::to_string(ranks_) + ": " +
                  what + " timed out after " + Seconds(timeout_s) +
                  " s (another rank died or hangs; --ep-timeout sets the limit)");
    }
    // As Communicator::Wait: spin briefly, then back off up to 1 ms.
    if (now - start > std::chrono::microseconds(50)) {
      pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
}

Expected<std::vector<uint8_t>> NcclExchange::NewJobId() {
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return Status::Error("nccl: ncclGetUniqueId failed: " + NcclText(r));
  }
  std::vector<uint8_t> bytes(sizeof(id));
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

Status NcclExchange::Join(std::span<const uint8_t> job_id, int rank, int ranks, double timeout_s) {
  CHECK(comm_ == nullptr && failure_.empty());
  if (job_id.size() != sizeof(ncclUniqueId)) {
    return Status::Error("nccl: a job id of " + std::to_string(job_id.size()) + " bytes, expected " +
                         std::to_string(sizeof(ncclUniqueId)));
  }
  rank_ = rank;
  ranks_ = ranks;
  ncclUniqueId id;
  std::memcpy(&id, job_id.data(), sizeof(id));
  device_.compute();  // this device current on this thread
  CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  CheckCuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
  // Non-blocking: ncclCommInitRankConfig returns at once and Poll waits for
  // the other ranks against the deadline, so a rank that never joins is an
  // error here rather than a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, ranks, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    comm_ = nullptr;
    return Fail("nccl: rank " + std::to_string(rank) + ": ncclCommInitRankConfig failed: " +
                NcclText(r));
  }
  return Poll([] { return true; }, timeout_s, "joining the other ranks' devices");
}

void NcclExchange::Leave() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);  // nothing was exchanged: no need to flush
  comm_ = nullptr;
}

Status NcclExchange::StartAllgatherv(const Tensor& buffer, std::span<const int> counts,
                                     std::span<const int> displs) {
  if (!failure_.empty()) return Unavailable(failure_);
  CHECK(comm_ != nullptr && !pending_);
  CHECK(int(counts.size()) == ranks_ && int(displs.size()) == ranks_);
  float* base = buffer.as<float>();
  // After the compute work that wrote this rank's rows; the compute stream
  // goes on (the shared expert) while the rows travel on stream_.
  CheckCuda(cudaEventRecord(ready_, device_.compute()), "cudaEventRecord");
  CheckCuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  // An all-gather of uneven blocks: one broadcast per rank from its block,
  // in place, fused into one group. Every rank skips the same empty blocks
  // (the routing, and so the counts, are the same everywhere).
  ncclResult_t r = ncclGroupStart();
  for (int root = 0; r == ncclSuccess && root < ranks_; ++root) {
    if (counts[size_t(root)] == 0) continue;
    float* block = base + displs[size_t(root)];
    r = ncclBroadcast(block, block, size_t(counts[size_t(root)]), ncclFloat, root, comm_, stream_);
    if (r == ncclInProgress) r = ncclSuccess;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess && end != ncclInProgress) r = end;
  if (r != ncclSuccess) {
    return Fail("nccl: rank " + std::to_string(rank_) + ": all-gather of expert outputs failed: " +
                NcclText(r));
  }
  pending_ = true;
  return Status::Ok();
}

Status NcclExchange::Finish(double timeout_s) {
  if (!pending_) return Status::Ok();
  pending_ = false;
  return Poll(
      [this] {
        const cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaErrorNotReady) return false;
        CheckCuda(e, "cudaStreamQuery");
        return true;
      },
      timeout_s, "all-gather of expert outputs");
}

NcclExchange::~NcclExchange() {
  if (comm_ != nullptr) {
    // A clean end flushes what is queued; a peer that is gone makes that
    // wait, so it is bounded like the rest and aborted past it.
    device_.compute();  // this device current on this thread
    const ncclResult_t r = ncclCommFinalize(comm_);
    if ((r != ncclSuccess && r != ncclInProgress) ||
        !Poll([] { return true; }, 10, "ending the exchange").ok()) {
      if (comm_ != nullptr) ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
  }
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

}  // namespace anymoe::cuda

#endif  // ANYMOE_HAVE_NCCL
