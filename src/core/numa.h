// Where the CPU backend's threads run and its memory lives (`--numa`), for
// machines with several NUMA nodes, as llama.cpp's option of the same name:
//   none        the OS places threads and pages (the default);
//   distribute  threads pinned one per core across every node in turn, pages
//               interleaved over the nodes, so each node's memory bandwidth
//               serves the weights;
//   isolate     threads pinned to the cores of the node the process started
//               on, pages preferred there (other nodes when it is full).
// Physical cores are taken before their SMT siblings. On a machine with one
// node, distribute and isolate both pin one thread per core and leave the
// memory policy alone. The plan is a pure function of the topology, so its
// multi-node behaviour is tested on synthetic machines.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

enum class NumaMode { kNone, kDistribute, kIsolate };

// "none", "distribute", "isolate"; nullopt for anything else.
std::optional<NumaMode> NumaModeFromName(std::string_view name);
const char* NumaModeName(NumaMode mode);

struct CpuTopology {
  struct Cpu {
    int id = 0;    // the OS's CPU number
    int node = 0;  // its NUMA node
    int core = 0;  // its physical core: SMT siblings share it (unique across packages)
  };
  std::vector<Cpu> cpus;  // the CPUs this process may run on, by id
};

struct NumaPlacement {
  // The CPU of each pool thread (index 0: the thread that calls ParallelFor);
  // empty: not pinned. More threads than CPUs wrap around.
  std::vector<int> thread_cpus;
  enum class Memory { kLeave, kInterleave, kPrefer };
  Memory memory = Memory::kLeave;
  std::vector<int> memory_nodes;  // the nodes of kInterleave / kPrefer, ascending
  // One line for logs and `doctor`, e.g. "distribute: 8 threads on 2 nodes, memory interleaved".
  std::string Describe(NumaMode mode) const;
};

// The placement of `threads` threads (<= 0: one per CPU the mode uses) on
// `topology` for `mode`; `current_node` is the node the process runs on now
// (isolate's node). Deterministic: the same inputs give the same plan.
NumaPlacement PlanNumaPlacement(const CpuTopology& topology, NumaMode mode, int threads,
                                int current_node);

// This machine's topology: the CPUs of the affinity mask with their node and
// core from sysfs (Linux); elsewhere, or when sysfs says nothing, one node
// whose cores are the affinity mask's (or hardware_concurrency) CPUs.
CpuTopology ReadCpuTopology();

// The node of the CPU the calling thread runs on (0 when unknown).
int CurrentNumaNode(const CpuTopology& topology);

// Sets the calling thread's memory policy to the placement's (threads it
// creates later inherit it, so call it before the pool and the weights).
// kLeave does nothing.
Status ApplyMemoryPolicy(const NumaPlacement& placement);

// Pins the calling thread to `cpu`; false when the OS refused.
bool PinThisThread(int cpu);

}  // namespace anymoe
