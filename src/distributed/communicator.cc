#include "distributed/communicator.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "core/check.h"

#ifdef ANYMOE_MPI
#include <mpi.h>
#endif

namespace anymoe {
namespace {

Communicator* joined = nullptr;

}  // namespace

Communicator* JoinedCommunicator() { return joined; }

int MpiLaunchSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(name)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

bool Communicator::Available() {
#ifdef ANYMOE_MPI
  return true;
#else
  return false;
#endif
}

#ifndef ANYMOE_MPI

Expected<std::unique_ptr<Communicator>> Communicator::Join(const CommunicatorOptions&) {
  return Status::Error("expert parallelism (--ep) needs MPI: this anymoe was built without it "
                       "(install openmpi-bin libopenmpi-dev and reconfigure with -DANYMOE_MPI=ON)");
}
Communicator::~Communicator() = default;
Status Communicator::Allgatherv(std::span<const float>, std::span<float>, std::span<const int>,
                                std::span<const int>) {
  return Status::Error("built without MPI");
}
Status Communicator::Alltoallv(std::span<const float>, std::span<const int>, std::span<const int>,
                               std::span<float>, std::span<const int>, std::span<const int>) {
  return Status::Error("built without MPI");
}
Status Communicator::StartAllgatherv(std::span<const float>, std::span<float>,
                                     std::span<const int>, std::span<const int>) {
  return Status::Error("built without MPI");
}
Status Communicator::FinishAllgatherv() { return Status::Error("built without MPI"); }
Status Communicator::Broadcast(std::span<uint8_t>, int) { return Status::Error("built without MPI"); }
Status Communicator::Barrier(double) { return Status::Error("built without MPI"); }
void Communicator::Abort(int code) { std::_Exit(code); }
Status Communicator::Wait(void*, const char*, double) { return Status::Error("built without MPI"); }
Status Communicator::Fail(std::string message) { return Status::Error(std::move(message)); }
void Communicator::MaybeInjectFault() {}

#else

namespace {

MPI_Comm& CommOf(void* p) { return *static_cast<MPI_Comm*>(p); }

// A failed or timed-out collective: the job cannot go on, and a server
// answers 503 for it (not 500: nothing was wrong with the request).
Status Failure(std::string message) {
  return Status::Error(std::move(message), ErrorKind::kUnavailable, "expert_parallel_failure");
}

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, size_t(length));
}

// ANYMOE_EP_FAULT=kill:RANK:N or stop:RANK:N (see MaybeInjectFault).
void ParseFault(int& rank, int64_t& at, int& signal) {
  const char* spec = std::getenv("ANYMOE_EP_FAULT");
  if (spec == nullptr) return;
  char kind[8] = {};
  int r = -1;
  long long n = 0;
  if (std::sscanf(spec, "%7[a-z]:%d:%lld", kind, &r, &n) != 3 || n < 1) return;
  const std::string k = kind;
  if (k != "kill" && k != "stop") return;
  rank = r;
  at = n;
  signal = k == "kill" ? SIGKILL : SIGSTOP;
}

}  // namespace

Expected<std::unique_ptr<Communicator>> Communicator::Join(const CommunicatorOptions& options) {
  if (joined != nullptr) return Status::Error("distributed: this process already joined its MPI job");
  if (!(options.timeout_s > 0)) return Status::Error("distributed: the timeout must be positive");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Collectives are called from one thread at a time (the scheduler's).
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      return Status::Error("distributed: MPI_Init failed (is this process started by mpirun?)");
    }
  }
  std::unique_ptr<Communicator> c(new Communicator());
  c->timeout_s_ = options.timeout_s;
  // Errors come back as codes (then Status), never as the default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto* comm = new MPI_Comm;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, comm); rc != MPI_SUCCESS) {
    delete comm;
    return Status::Error("distributed: MPI_Comm_dup: " + MpiErrorText(rc));
  }
  MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
  c->comm_ = comm;
  MPI_Comm_rank(*comm, &c->rank_);
  MPI_Comm_size(*comm, &c->size_);
  ParseFault(c->fault_rank_, c->fault_at_, c->fault_signal_);
  joined = c.get();
  return c;
}

Communicator::~Communicator() {
  if (joined == this) joined = nullptr;
  if (comm_ == nullptr) return;
  if (failed_) Abort(1);  // a peer may be gone: MPI_Finalize could wait for it forever
  delete static_cast<MPI_Request*>(pending_);
  MPI_Comm_free(&CommOf(comm_));
  delete static_cast<MPI_Comm*>(comm_);
  MPI_Finalize();
}

void Communicator::Abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(comm_ ? CommOf(comm_) : MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort should not return
}

Status Communicator::Fail(std::string message) {
  failed_ = true;
  failure_ = message;
  return Failure(std::move(message));
}

void Communicator::MaybeInjectFault() {
  ++collectives_;
  if (fault_rank_ == rank_ && collectives_ == fault_at_) std::raise(fault_signal_);
}

Status Communicator::Wait(void* request, const char* what, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    if (int rc = MPI_Test(static_cast<MPI_Request*>(request), &done, MPI_STATUS_IGNORE);
        rc != MPI_SUCCESS) {
      return Fail("distributed: rank " + std::to_string(rank_) + ": " + what + " failed: " +
                  MpiErrorText(rc));
    }
    if (done) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
      return Fail("distributed: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                  ": " + what + " timed out after " + seconds +
                  " s (another rank died or hangs; --ep-timeout sets the limit)");
    }
    // Spin briefly, then back off (up to 1 ms) so that oversubscribed ranks
    // leave the cores to the ranks still computing.
    if (now - start > std::chrono::microseconds(50)) {
      pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
  wait_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status Communicator::Allgatherv(std::span<const float> send, std::span<float> recv,
                                std::span<const int> counts, std::span<const int> displs) {
  RETURN_IF_ERROR(StartAllgatherv(send, recv, counts, displs));
  return FinishAllgatherv();
}

Status Communicator::StartAllgatherv(std::span<const float> send, std::span<float> recv,
                                     std::span<const int> counts, std::span<const int> displs) {
  if (failed_) return Failure(failure_);
  CHECK(pending_ == nullptr);
  MaybeInjectFault();
  auto request = std::make_unique<MPI_Request>();
  // This rank's block already in place in `recv`: send it from there.
  const bool in_place = send.data() == recv.data() + displs[size_t(rank_)];
  if (int rc = MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send.data(), int(send.size()), MPI_FLOAT,
                               recv.data(), counts.data(), displs.data(), MPI_FLOAT, CommOf(comm_),
                               request.get());
      rc != MPI_SUCCESS) {
    return Fail("distributed: all-gather failed: " + MpiErrorText(rc));
  }
  bytes_sent_ += uint64_t(send.size()) * 4 * uint64_t(size_ - 1);
  pending_ = request.release();
  return Status::Ok();
}

Status Communicator::FinishAllgatherv() {
  CHECK(pending_ != nullptr);
  std::unique_ptr<MPI_Request> request(static_cast<MPI_Request*>(pending_));
  pending_ = nullptr;
  return Wait(request.get(), "all-gather of expert outputs", timeout_s_);
}

Status Communicator::Alltoallv(std::span<const float> send, std::span<const int> send_counts,
                               std::span<const int> send_displs, std::span<float> recv,
                               std::span<const int> recv_counts, std::span<const int> recv_displs) {
  if (failed_) return Failure(failure_);
  MaybeInjectFault();
  MPI_Request request;
  if (int rc = MPI_Ialltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_FLOAT,
                              recv.data(), recv_counts.data(), recv_displs.data(), MPI_FLOAT,
                              CommOf(comm_), &request);
      rc != MPI_SUCCESS) {
    return Fail("distributed: all-to-all failed: " + MpiErrorText(rc));
  }
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) bytes_sent_ += uint64_t(send_counts[size_t(r)]) * 4;
  }
  return Wait(&request, "all-to-all", timeout_s_);
}

Status Communicator::Broadcast(std::span<uint8_t> data, int root) {
  if (failed_) return Failure(failure_);
  MaybeInjectFault();
  MPI_Request request;
  if (int rc = MPI_Ibcast(data.data(), int(data.size()), MPI_BYTE, root, CommOf(comm_), &request);
      rc != MPI_SUCCESS) {
    return Fail("distributed: broadcast failed: " + MpiErrorText(rc));
  }
  if (rank_ == root) bytes_sent_ += uint64_t(data.size()) * uint64_t(size_ - 1);
  return Wait(&request, "broadcast", timeout_s_);
}

Status Communicator::Barrier(double timeout_s) {
  if (failed_) return Failure(failure_);
  MPI_Request request;
  if (int rc = MPI_Ibarrier(CommOf(comm_), &request); rc != MPI_SUCCESS) {
    return Fail("distributed: barrier failed: " + MpiErrorText(rc));
  }
  return Wait(&request, "barrier", timeout_s);
}

#endif

}  // namespace anymoe
