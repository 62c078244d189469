// The ranks of one MPI job (started by mpirun) and the few collectives expert
// parallelism needs: all-gather and all-to-all of f32 rows, broadcast, barrier.
// Every wait polls a non-blocking operation against a deadline, so a rank that
// died or hangs turns into a Status error on the others instead of a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

namespace anymoe {

struct CommunicatorOptions {
  // Longest wait for the other ranks in one collective (seconds).
  double timeout_s = 60;
};

class Communicator {
 public:
  // Whether this build has MPI (ANYMOE_MPI).
  static bool Available();
  // Joins the job this process was launched in (a lone process is a job of
  // one). Once per process; an error without MPI or when MPI cannot start.
  static Expected<std::unique_ptr<Communicator>> Join(const CommunicatorOptions& options);
  // Finalises MPI after a clean run; after a failure use Abort.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }

  // Every rank contributes `send`; rank r's floats land in
  // recv[displs[r], +counts[r]] on every rank. `send` may be this rank's own
  // block of `recv` (sent from there).
  Status Allgatherv(std::span<const float> send, std::span<float> recv,
                    std::span<const int> counts, std::span<const int> displs);
  // The same in two halves, so that a rank computes while the rows travel:
  // StartAllgatherv returns once the exchange is under way (the buffers must
  // stay untouched), FinishAllgatherv waits for it. One at a time.
  Status StartAllgatherv(std::span<const float> send, std::span<float> recv,
                         std::span<const int> counts, std::span<const int> displs);
  Status FinishAllgatherv();
  // send[send_displs[r], +send_counts[r]] goes to rank r, which receives it at
  // recv[recv_displs[me], +recv_counts[me]].
  Status Alltoallv(std::span<const float> send, std::span<const int> send_counts,
                   std::span<const int> send_displs, std::span<float> recv,
                   std::span<const int> recv_counts, std::span<const int> recv_displs);
  // `data` of rank `root` copied to every rank.
  Status Broadcast(std::span<uint8_t> data, int root);
  // Waits for every rank, for at most `timeout_s` (e.g. longer than usual
  // after loading, when ranks may read the model file at different speeds).
  Status Barrier(double timeout_s);

  // Totals since Join: bytes this rank sent, seconds it waited in collectives.
  uint64_t bytes_sent() const { return bytes_sent_; }
  double wait_seconds() const { return wait_seconds_; }
  // Adds an exchange that went around MPI (NCCL between devices) to those totals.
  void CountExchange(uint64_t bytes_sent, double wait_seconds) {
    bytes_sent_ += bytes_sent;
    wait_seconds_ += wait_seconds;
  }
  bool failed() const { return failed_; }
  // The first failure's message (empty while none): a later call answers it
  // again, so the error names the exchange that failed first.
  const std::string& failure() const { return failure_; }

  // Ends every rank of the job (a peer may be dead or hung, so MPI cannot be
  // finalised cleanly). Does not return.
  [[noreturn]] void Abort(int code);

 private:
  Communicator() = default;
  // Polls `request` (an MPI_Request*) until done or `timeout_s` passed.
  Status Wait(void* request, const char* what, double timeout_s);
  // Marks the communicator failed with `message`; returns it as the error.
  Status Fail(std::string message);
  // Test hook (ANYMOE_EP_FAULT=kill|stop:RANK:N): this rank kills or stops
  // itself at its N-th collective, to exercise the fault path for real.
  void MaybeInjectFault();

  int rank_ = 0, size_ = 1;
  double timeout_s_ = 60;
  void* comm_ = nullptr;  // MPI_Comm (a dup of MPI_COMM_WORLD)
  void* pending_ = nullptr;  // MPI_Request of a started all-gather, else null
  uint64_t bytes_sent_ = 0;
  double wait_seconds_ = 0;
  bool failed_ = false;
  std::string failure_;
  int64_t collectives_ = 0;
  int fault_rank_ = -1;
  int64_t fault_at_ = 0;
  int fault_signal_ = 0;
};

// Ranks of the job mpirun (or another PMI launcher) started this process in,
// from its environment; 1 when not started that way.
int MpiLaunchSize();

// The communicator this process joined, or null: lets an error path end the
// whole job (Abort) instead of leaving the other ranks waiting.
Communicator* JoinedCommunicator();

}  // namespace anymoe
