// How much memory this process can still take: the kernel's MemAvailable,
// lowered to what the memory cgroup (v1 or v2) the process runs in leaves
// under its limit (its page cache counted as reclaimable). Used to decide,
// before loading, whether a model fits or its experts must stream from disk.
#pragma once

#include <cstdint>
#include <optional>

namespace anymoe {

struct SystemMemory {
  uint64_t available = 0;                // bytes this process may still use
  std::optional<uint64_t> cgroup_limit;  // when a memory cgroup limits it
};

SystemMemory QuerySystemMemory();

// This process's resident memory now (VmRSS: anonymous and file pages), 0 if
// /proc cannot tell.
uint64_t ProcessResidentBytes();
// The most it has held so far (VmHWM), 0 if /proc cannot tell.
uint64_t ProcessPeakResidentBytes();

}  // namespace anymoe
