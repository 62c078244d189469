// --numa's placement (core/numa.h): the plan on synthetic multi-node machines
// (threads spread over or kept on nodes, physical cores before SMT siblings,
// memory interleaved or preferred), what it does on this machine's real
// topology, and the thread pool running each thread on its planned CPU.
#include "core/numa.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <vector>

#include "core/thread_pool.h"

namespace anymoe {
namespace {

// `nodes` nodes of `cores` cores with `smt` threads each; CPU ids numbered as
// Linux does on a two-socket x86 machine: the first thread of every core of
// every node, then the second threads.
CpuTopology Synthetic(int nodes, int cores, int smt) {
  CpuTopology t;
  for (int s = 0; s < smt; ++s) {
    for (int n = 0; n < nodes; ++n) {
      for (int c = 0; c < cores; ++c) {
        t.cpus.push_back({(s * nodes + n) * cores + c, n, n * cores + c});
      }
    }
  }
  return t;
}

std::map<int, CpuTopology::Cpu> ById(const CpuTopology& t) {
  std::map<int, CpuTopology::Cpu> m;
  for (const auto& c : t.cpus) m[c.id] = c;
  return m;
}

TEST(Numa, ModesParseByName) {
  EXPECT_EQ(NumaModeFromName("none"), NumaMode::kNone);
  EXPECT_EQ(NumaModeFromName("distribute"), NumaMode::kDistribute);
  EXPECT_EQ(NumaModeFromName("isolate"), NumaMode::kIsolate);
  EXPECT_EQ(NumaModeFromName("numactl"), std::nullopt);
  EXPECT_EQ(NumaModeFromName(""), std::nullopt);
  for (NumaMode m : {NumaMode::kNone, NumaMode::kDistribute, NumaMode::kIsolate}) {
    EXPECT_EQ(NumaModeFromName(NumaModeName(m)), m);
  }
}

TEST(Numa, NoneLeavesThreadsAndMemoryToTheOs) {
  const NumaPlacement p = PlanNumaPlacement(Synthetic(2, 4, 2), NumaMode::kNone, 8, 0);
  EXPECT_TRUE(p.thread_cpus.empty());
  EXPECT_EQ(p.memory, NumaPlacement::Memory::kLeave);
}

TEST(Numa, DistributeAlternatesNodesPhysicalCoresFirstAndInterleavesMemory) {
  const CpuTopology t = Synthetic(2, 4, 2);  // CPUs 0-7 first threads, 8-15 siblings
  const auto cpu = ById(t);
  const NumaPlacement all = PlanNumaPlacement(t, NumaMode::kDistribute, 0, 1);
  ASSERT_EQ(all.thread_cpus.size(), 16u);  // <= 0 threads: every CPU
  EXPECT_EQ(std::set<int>(all.thread_cpus.begin(), all.thread_cpus.end()).size(), 16u);
  std::set<int> cores;
  for (size_t i = 0; i < all.thread_cpus.size(); ++i) {
    const auto& c = cpu.at(all.thread_cpus[i]);
    EXPECT_EQ(c.node, int(i % 2)) << "thread " << i;
    // The first 8 threads take 8 different physical cores.
    if (i < 8) {
      EXPECT_TRUE(cores.insert(c.core).second) << "thread " << i << " shares a core";
    }
  }
  EXPECT_EQ(all.thread_cpus[0], 0);
  EXPECT_EQ(all.thread_cpus[1], 4);
  EXPECT_EQ(all.memory, NumaPlacement::Memory::kInterleave);
  EXPECT_EQ(all.memory_nodes, (std::vector<int>{0, 1}));

  const NumaPlacement four = PlanNumaPlacement(t, NumaMode::kDistribute, 4, 0);
  EXPECT_EQ(four.thread_cpus, (std::vector<int>{0, 4, 1, 5}));
  // Deterministic, and threads past the CPUs wrap around.
  EXPECT_EQ(PlanNumaPlacement(t, NumaMode::kDistribute, 4, 0).thread_cpus, four.thread_cpus);
  const NumaPlacement many = PlanNumaPlacement(t, NumaMode::kDistribute, 18, 0);
  ASSERT_EQ(many.thread_cpus.size(), 18u);
  EXPECT_EQ(many.thread_cpus[16], many.thread_cpus[0]);
}

TEST(Numa, IsolateKeepsThreadsOnTheStartingNodeAndPrefersItsMemory) {
  const CpuTopology t = Synthetic(2, 4, 2);
  const auto cpu = ById(t);
  const NumaPlacement p = PlanNumaPlacement(t, NumaMode::kIsolate, 0, 1);
  ASSERT_EQ(p.thread_cpus.size(), 8u);  // the node's CPUs
  for (size_t i = 0; i < p.thread_cpus.size(); ++i) {
    EXPECT_EQ(cpu.at(p.thread_cpus[i]).node, 1);
  }
  // Physical cores first: 4-7, then their siblings 12-15.
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_EQ(p.memory, NumaPlacement::Memory::kPrefer);
  EXPECT_EQ(p.memory_nodes, (std::vector<int>{1}));
  EXPECT_EQ(PlanNumaPlacement(t, NumaMode::kIsolate, 3, 0).thread_cpus,
            (std::vector<int>{0, 1, 2}));
}

TEST(Numa, IsolateOnANodeOutsideTheAffinityMaskTakesTheFirstAllowedNode) {
  CpuTopology t = Synthetic(3, 2, 1);  // nodes 0, 1, 2; CPUs 0-5
  t.cpus.erase(t.cpus.begin(), t.cpus.begin() + 2);  // node 0 not allowed (taskset)
  const NumaPlacement p = PlanNumaPlacement(t, NumaMode::kIsolate, 0, 0);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(p.memory_nodes, (std::vector<int>{1}));
  // distribute uses only the allowed nodes too.
  EXPECT_EQ(PlanNumaPlacement(t, NumaMode::kDistribute, 0, 0).memory_nodes,
            (std::vector<int>{1, 2}));
}

TEST(Numa, OnOneNodeBothModesPinOneThreadPerCoreAndLeaveMemory) {
  const CpuTopology t = Synthetic(1, 4, 2);
  for (NumaMode mode : {NumaMode::kDistribute, NumaMode::kIsolate}) {
    const NumaPlacement p = PlanNumaPlacement(t, mode, 0, 0);
    EXPECT_EQ(p.thread_cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << NumaModeName(mode);
    EXPECT_EQ(p.memory, NumaPlacement::Memory::kLeave) << NumaModeName(mode);
    EXPECT_TRUE(ApplyMemoryPolicy(p).ok());  // kLeave: nothing to set
  }
}

// This machine (one node here and in CI): the real topology, and its plan.
TEST(Numa, ThisMachinesTopologyAndPlan) {
  const CpuTopology t = ReadCpuTopology();
  ASSERT_FALSE(t.cpus.empty());
  std::set<int> ids, nodes;
  for (const auto& c : t.cpus) {
    EXPECT_TRUE(ids.insert(c.id).second) << "CPU " << c.id << " twice";
    nodes.insert(c.node);
  }
  EXPECT_TRUE(nodes.count(CurrentNumaNode(t)));
  for (NumaMode mode : {NumaMode::kDistribute, NumaMode::kIsolate}) {
    const NumaPlacement p = PlanNumaPlacement(t, mode, 0, CurrentNumaNode(t));
    EXPECT_FALSE(p.thread_cpus.empty());
    for (int c : p.thread_cpus) EXPECT_TRUE(ids.count(c)) << c;
    if (nodes.size() == 1) {
      EXPECT_EQ(p.thread_cpus.size(), t.cpus.size());
      EXPECT_EQ(p.memory, NumaPlacement::Memory::kLeave);
      EXPECT_NE(p.Describe(mode).find("memory placed by the OS"), std::string::npos)
          << p.Describe(mode);
    }
  }
}

// Every pool thread, the caller included, runs on its planned CPU.
TEST(Numa, ThreadPoolThreadsRunOnTheirPlannedCpus) {
  const CpuTopology t = ReadCpuTopology();
  const NumaPlacement p = PlanNumaPlacement(t, NumaMode::kDistribute, 3, CurrentNumaNode(t));
  ASSERT_EQ(p.thread_cpus.size(), 3u);
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  {
    ThreadPool pool(3, p.thread_cpus);
    std::vector<std::atomic<int>> seen(3);
    for (auto& s : seen) s = -2;
    std::atomic<int> mismatches{0};
    for (int round = 0; round < 50; ++round) {
      pool.ParallelFor(64, [&](int64_t, int thread) {
        const int cpu = sched_getcpu();
        seen[size_t(thread)] = cpu;
        if (cpu != p.thread_cpus[size_t(thread)]) ++mismatches;
      });
    }
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_EQ(seen[0].load(), p.thread_cpus[0]);  // the caller ran tasks, pinned
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);  // unpin the test's thread
}

}  // namespace
}  // namespace anymoe
