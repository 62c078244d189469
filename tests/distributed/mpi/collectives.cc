// (Not named *_test.cc: it has its own main and runs under mpirun, not in distributed_tests.)
// The communicator's collectives between real ranks: this binary runs under
// `mpirun -np 3` (ctest Distributed.MpiCollectives). Each rank's data is a
// function of its rank, so every rank can check what it received.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "distributed/communicator.h"

namespace anymoe {
namespace {

Communicator* comm = nullptr;

// Floats rank r sends to rank d in the all-to-all: (r + 1) * 100 + d + i / 8, r + d + 1 of them.
int Count(int from, int to) { return from + to + 1; }
float Value(int from, int to, int i) { return float((from + 1) * 100 + to) + float(i) / 8; }

TEST(MpiCollectives, AllgathervPlacesEveryRanksBlock) {
  const int n = comm->size(), me = comm->rank();
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  int total = 0;
  for (int r = 0; r < n; ++r) {
    counts[size_t(r)] = 2 * r + 1;
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<float> recv(size_t(total), -1.0f);
  std::vector<float> send(static_cast<size_t>(counts[size_t(me)]));
  for (size_t i = 0; i < send.size(); ++i) send[i] = float(me * 1000 + int(i));
  ASSERT_TRUE(comm->Allgatherv(send, recv, counts, displs).ok());
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < counts[size_t(r)]; ++i) {
      EXPECT_EQ(recv[size_t(displs[size_t(r)] + i)], float(r * 1000 + i)) << "from rank " << r;
    }
  }
  // In place: this rank's block already sits in the receive buffer.
  std::vector<float> in_place(size_t(total), -1.0f);
  std::copy(send.begin(), send.end(), in_place.begin() + displs[size_t(me)]);
  const std::span<float> all(in_place);
  ASSERT_TRUE(comm->Allgatherv(all.subspan(size_t(displs[size_t(me)]), send.size()), all, counts,
                               displs)
                  .ok());
  EXPECT_EQ(in_place, recv);
}

TEST(MpiCollectives, AlltoallvDeliversEachPairsRows) {
  const int n = comm->size(), me = comm->rank();
  std::vector<int> sc(static_cast<size_t>(n)), sd(sc), rc(sc), rd(sc);
  int st = 0, rt = 0;
  for (int r = 0; r < n; ++r) {
    sc[size_t(r)] = Count(me, r);
    sd[size_t(r)] = st;
    st += sc[size_t(r)];
    rc[size_t(r)] = Count(r, me);
    rd[size_t(r)] = rt;
    rt += rc[size_t(r)];
  }
  std::vector<float> send(static_cast<size_t>(st)), recv(static_cast<size_t>(rt), -1.0f);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < sc[size_t(r)]; ++i) send[size_t(sd[size_t(r)] + i)] = Value(me, r, i);
  }
  const uint64_t sent = comm->bytes_sent();
  ASSERT_TRUE(comm->Alltoallv(send, sc, sd, recv, rc, rd).ok());
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < rc[size_t(r)]; ++i) {
      EXPECT_EQ(recv[size_t(rd[size_t(r)] + i)], Value(r, me, i)) << "from rank " << r;
    }
  }
  // Bytes to the other ranks only.
  EXPECT_EQ(comm->bytes_sent() - sent, uint64_t(st - sc[size_t(me)]) * 4);
}

TEST(MpiCollectives, BroadcastCopiesTheRootsBytes) {
  for (int root = 0; root < comm->size(); ++root) {
    std::vector<uint8_t> data(37, uint8_t(comm->rank() == root ? root + 1 : 0));
    ASSERT_TRUE(comm->Broadcast(data, root).ok());
    EXPECT_EQ(data, std::vector<uint8_t>(37, uint8_t(root + 1)));
  }
  EXPECT_TRUE(comm->Barrier(10).ok());
  EXPECT_FALSE(comm->failed());
}

TEST(MpiCollectives, JoinTwiceIsRefused) {
  auto again = Communicator::Join({});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already joined"), std::string::npos);
}

}  // namespace
}  // namespace anymoe

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto joined = anymoe::Communicator::Join({10});
  if (!joined.ok()) {
    std::fprintf(stderr, "%s\n", joined.status().message().c_str());
    return 1;
  }
  anymoe::comm = joined->get();
  // Only rank 0 reports; every rank's failures still fail the job's exit code.
  if (anymoe::comm->rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  return rc;
}
