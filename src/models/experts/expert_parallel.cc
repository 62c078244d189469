#include "models/experts/expert_parallel.h"

#include <chrono>

#include "core/check.h"

namespace anymoe {

ExpertParallelLayer::ExpertParallelLayer(Communicator& comm, std::span<const int32_t> owners,
                                         int64_t max_pairs)
    : comm_(comm), owners_(owners.begin(), owners.end()) {
  local_rows_.resize(size_t(max_pairs));
  position_.resize(size_t(max_pairs));
  local_offsets_.resize(owners.size() + 1);
  counts_.resize(size_t(comm.size()));
  displs_.resize(size_t(comm.size()));
  cursor_.resize(size_t(comm.size()));
}

uint64_t ExpertParallelLayer::WorkspaceFloats(int64_t pairs, int64_t hidden) {
  return 2 * Workspace::Footprint(pairs, hidden);  // this rank's rows in, everyone's rows out
}

Status ExpertParallelLayer::Start(Backend& be, Workspace& ws, const Tensor& xe,
                                  std::span<const int32_t> offsets, std::span<const Tensor> gate,
                                  std::span<const Tensor> up, std::span<const Tensor> down,
                                  const Tensor& g, const Tensor& u) {
  const int64_t experts = int64_t(owners_.size()), m = xe.rows(), h = xe.cols();
  const int me = comm_.rank(), ranks = comm_.size();
  CHECK(int64_t(offsets.size()) == experts + 1 && m <= int64_t(position_.size()));
  // Rows per rank, then each rank's block in expert order: rank-major, the
  // order in which the all-gather lays them out.
  std::fill(counts_.begin(), counts_.end(), 0);
  for (int64_t e = 0; e < experts; ++e) {
    counts_[size_t(owners_[size_t(e)])] += offsets[size_t(e) + 1] - offsets[size_t(e)];
  }
  int at = 0;
  for (int r = 0; r < ranks; ++r) {
    displs_[size_t(r)] = at;
    cursor_[size_t(r)] = at;
    at += counts_[size_t(r)];
  }
  int64_t local = 0;
  local_offsets_[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int owner = owners_[size_t(e)];
    for (int32_t row = offsets[size_t(e)]; row < offsets[size_t(e) + 1]; ++row) {
      position_[size_t(row)] = cursor_[size_t(owner)]++;
      if (owner == me) local_rows_[size_t(local++)] = row;
    }
    local_offsets_[size_t(e) + 1] = int32_t(local);
  }
  // Everyone's output rows land in `gathered` [M, H]; this rank writes its own
  // block in place, so the all-gather sends it from there.
  Tensor gathered = ws.Take(m, h);
  const Tensor yl = gathered.RowSlice(displs_[size_t(me)], local);
  if (local > 0) {
    Tensor xl = ws.Take(local, h);
    const Tensor gl = g.RowSlice(0, local), ul = u.RowSlice(0, local);
    be.GatherRows(xe, std::span<const int32_t>(local_rows_).first(size_t(local)), xl);
    const GroupedProjection gate_up[] = {{gate, gl}, {up, ul}};
    be.MultiGroupedMatmul(xl, gate_up, local_offsets_);
    be.SwiGluLimited(gl, ul, swiglu_limit_, gl);
    be.GroupedMatmul(gl, down, local_offsets_, yl);
  }
  for (int r = 0; r < ranks; ++r) {
    counts_[size_t(r)] *= int(h);
    displs_[size_t(r)] *= int(h);
  }
  gathered_ = gathered;
  rows_ = m;
  DeviceExchange* dx = be.device_exchange();
  if (dx != nullptr && dx->joined()) {
    path_ = Path::kDevice;
    return dx->StartAllgatherv(gathered, counts_, displs_);
  }
  // The CPU backend's tensors are host memory: MPI reads and writes them in
  // place. A device's are not: this rank's rows go through a host copy.
  path_ = be.kind() == BackendKind::kCpu ? Path::kInPlace : Path::kHostCopy;
  std::span<float> recv;
  if (path_ == Path::kHostCopy) {
    if (host_gathered_.size() < size_t(m * h)) host_gathered_.resize(size_t(m * h));
    recv = std::span<float>(host_gathered_).first(size_t(m * h));
    if (local > 0) {
      be.ReadF32(yl, recv.subspan(size_t(displs_[size_t(me)]), size_t(counts_[size_t(me)])));
    }
  } else {
    be.Synchronize();
    recv = std::span<float>(gathered.as<float>(), size_t(m * h));
  }
  return comm_.StartAllgatherv(
      recv.subspan(size_t(displs_[size_t(me)]), size_t(counts_[size_t(me)])), recv, counts_,
      displs_);
}

Status ExpertParallelLayer::Finish(Backend& be, const Tensor& ye) {
  if (path_ == Path::kDevice) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(be.device_exchange()->Finish(comm_.timeout_s()));
    const int me = comm_.rank();
    comm_.CountExchange(
        uint64_t(counts_[size_t(me)]) * 4 * uint64_t(comm_.size() - 1),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  } else {
    RETURN_IF_ERROR(comm_.FinishAllgatherv());
  }
  if (path_ == Path::kHostCopy) {
    be.WriteF32(std::span<const float>(host_gathered_).first(size_t(rows_ * gathered_.cols())),
                gathered_);
  }
  // Back to the single-process row order, which the weighted sum follows.
  be.GatherRows(gathered_, std::span<const int32_t>(position_).first(size_t(rows_)), ye);
  return Status::Ok();
}

}  // namespace anymoe
