#include "core/numa.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#ifdef __linux__
#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace anymoe {
namespace {

// The memory policies of set_mempolicy(2) (linux/mempolicy.h).
constexpr int kMpolPreferred = 1, kMpolInterleave = 3;

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; nothing on a malformed list.
std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> out;
  size_t i = 0;
  auto number = [&](int& v) {
    const size_t start = i;
    v = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9' && i - start < 7) {
      v = v * 10 + (list[i++] - '0');
    }
    return i > start;
  };
  while (i < list.size() && list[i] != '\n') {
    int a = 0, b = 0;
    if (!number(a)) return {};
    b = a;
    if (i < list.size() && list[i] == '-') {
      ++i;
      if (!number(b) || b < a) return {};
    }
    for (int c = a; c <= b; ++c) out.push_back(c);
    if (i < list.size() && list[i] == ',') ++i;
  }
  return out;
}

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Each node's CPUs of `topology`, physical cores first: the first thread of
// every core in core order, then the second thread of every core, and so on.
std::map<int, std::vector<int>> CoresFirstByNode(const CpuTopology& topology) {
  std::map<int, std::map<int, std::vector<int>>> by_node_core;  // node -> core -> cpus
  for (const CpuTopology::Cpu& c : topology.cpus) by_node_core[c.node][c.core].push_back(c.id);
  std::map<int, std::vector<int>> out;
  for (auto& [node, cores] : by_node_core) {
    std::vector<int>& order = out[node];
    for (size_t level = 0;; ++level) {
      const size_t before = order.size();
      for (auto& [core, cpus] : cores) {
        std::sort(cpus.begin(), cpus.end());
        if (level < cpus.size()) order.push_back(cpus[level]);
      }
      if (order.size() == before) break;
    }
  }
  return out;
}

}  // namespace

std::optional<NumaMode> NumaModeFromName(std::string_view name) {
  if (name == "none") return NumaMode::kNone;
  if (name == "distribute") return NumaMode::kDistribute;
  if (name == "isolate") return NumaMode::kIsolate;
  return std::nullopt;
}

const char* NumaModeName(NumaMode mode) {
  switch (mode) {
    case NumaMode::kDistribute:
      return "distribute";
    case NumaMode::kIsolate:
      return "isolate";
    default:
      return "none";
  }
}

std::string NumaPlacement::Describe(NumaMode mode) const {
  std::string s = NumaModeName(mode);
  if (thread_cpus.empty()) return s.append(": threads and memory placed by the OS");
  s.append(": ").append(std::to_string(thread_cpus.size())).append(" threads pinned to CPUs");
  for (int c : thread_cpus) s.append(" ").append(std::to_string(c));
  if (memory == Memory::kLeave) return s.append(", memory placed by the OS");
  s.append(memory == Memory::kInterleave ? ", memory interleaved over nodes"
                                         : ", memory preferred on node");
  for (int n : memory_nodes) s.append(" ").append(std::to_string(n));
  return s;
}

NumaPlacement PlanNumaPlacement(const CpuTopology& topology, NumaMode mode, int threads,
                                int current_node) {
  NumaPlacement plan;
  if (mode == NumaMode::kNone || topology.cpus.empty()) return plan;
  const std::map<int, std::vector<int>> nodes = CoresFirstByNode(topology);
  std::vector<int> order;  // the CPUs in the order threads take them
  std::vector<int> used_nodes;
  if (mode == NumaMode::kIsolate) {
    // The current node, or the first with CPUs we may use when it has none.
    auto it = nodes.find(current_node);
    if (it == nodes.end()) it = nodes.begin();
    order = it->second;
    used_nodes = {it->first};
  } else {
    // Round robin over the nodes: thread i on node i % nodes, each node's
    // CPUs physical cores first.
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (const auto& [node, cpus] : nodes) {
        if (i < cpus.size()) {
          order.push_back(cpus[i]);
          any = true;
        }
      }
      if (!any) break;
    }
    for (const auto& [node, cpus] : nodes) used_nodes.push_back(node);
  }
  const size_t n = threads > 0 ? size_t(threads) : order.size();
  for (size_t i = 0; i < n; ++i) plan.thread_cpus.push_back(order[i % order.size()]);
  if (nodes.size() > 1) {  // one node: nothing to choose between
    plan.memory = mode == NumaMode::kIsolate ? NumaPlacement::Memory::kPrefer
                                              : NumaPlacement::Memory::kInterleave;
    plan.memory_nodes = used_nodes;
  }
  return plan;
}

CpuTopology ReadCpuTopology() {
  CpuTopology topology;
  std::vector<int> allowed;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) allowed.push_back(c);
    }
  }
  std::map<int, int> node_of;
  if (DIR* dir = opendir("/sys/devices/system/node")) {
    while (const dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name.rfind("node", 0) != 0 || name.size() == 4 ||
          name.find_first_not_of("0123456789", 4) != std::string::npos) {
        continue;
      }
      if (name.size() > 10) continue;
      const int node = std::atoi(name.c_str() + 4);
      for (int c : ParseCpuList(ReadLine("/sys/devices/system/node/" + name + "/cpulist"))) {
        node_of[c] = node;
      }
    }
    closedir(dir);
  }
  for (int c : allowed) {
    const std::string cpu = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    // A core is its package and its core id; without sysfs, each CPU its own core.
    const std::string package = ReadLine(cpu + "physical_package_id");
    const std::string core = ReadLine(cpu + "core_id");
    int key = c;
    if (!package.empty() && !core.empty()) {
      key = std::atoi(package.c_str()) * 65536 + std::atoi(core.c_str());
    }
    const auto node = node_of.find(c);
    topology.cpus.push_back({c, node == node_of.end() ? 0 : node->second, key});
  }
#endif
  if (topology.cpus.empty()) {
    const int n = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) topology.cpus.push_back({c, 0, c});
  }
  return topology;
}

int CurrentNumaNode(const CpuTopology& topology) {
#ifdef __linux__
  const int cpu = sched_getcpu();
  for (const CpuTopology::Cpu& c : topology.cpus) {
    if (c.id == cpu) return c.node;
  }
#endif
  return topology.cpus.empty() ? 0 : topology.cpus.front().node;
}

Status ApplyMemoryPolicy(const NumaPlacement& placement) {
  if (placement.memory == NumaPlacement::Memory::kLeave) return Status::Ok();
#ifdef __linux__
  constexpr int kMaxNodes = 1024;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  constexpr size_t kBits = 8 * sizeof(unsigned long);
  for (int n : placement.memory_nodes) {
    if (n < 0 || n >= kMaxNodes) {
      return Status::Error("--numa: node " + std::to_string(n) + " out of range");
    }
    mask[size_t(n) / kBits] |= 1ul << (size_t(n) % kBits);
  }
  const int policy =
      placement.memory == NumaPlacement::Memory::kInterleave ? kMpolInterleave : kMpolPreferred;
  if (syscall(SYS_set_mempolicy, policy, mask, (unsigned long)(kMaxNodes)) != 0) {
    return Status::Error("--numa: set_mempolicy failed (errno " + std::to_string(errno) + ")");
  }
  return Status::Ok();
#else
  return Status::Error("--numa: memory policies need Linux");
#endif
}

bool PinThisThread(int cpu) {
#ifdef __linux__
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

}  // namespace anymoe
