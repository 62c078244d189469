#include "core/system_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace anymoe {
namespace {

std::optional<uint64_t> ReadNumber(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return std::nullopt;
  try {
    return std::stoull(s);
  } catch (...) {
    return std::nullopt;
  }
}

// `key value` lines (memory.stat, /proc/meminfo without the kB unit).
std::optional<uint64_t> ReadKey(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  uint64_t v;
  while (f >> k >> v) {
    if (k == key) return v;
    f.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

// The memory cgroup's folder: v1 "N:memory:/path", v2 "0::/path".
std::optional<std::pair<std::string, bool>> CgroupDir() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  std::optional<std::pair<std::string, bool>> v2;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::stringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ',')) {
      if (c == "memory") return std::make_pair("/sys/fs/cgroup/memory" + path, true);
    }
    if (controllers.empty()) v2 = std::make_pair("/sys/fs/cgroup" + path, false);
  }
  return v2;
}

// A "Key:  N kB" line of /proc/self/status in bytes, 0 if absent.
uint64_t StatusBytes(const std::string& key) {
  // /proc/self/status mixes text and numbers ("Name:\tanymoe"), so look for
  // the line rather than reading key/number pairs.
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream kb(line.substr(key.size()));
    uint64_t v = 0;
    return kb >> v ? v * 1024 : 0;
  }
  return 0;
}

}  // namespace

SystemMemory QuerySystemMemory() {
  SystemMemory m;
  m.available = ReadKey("/proc/meminfo", "MemAvailable:").value_or(0) * 1024;
  const auto dir = CgroupDir();
  if (!dir) return m;
  const auto& [path, v1] = *dir;
  const auto limit = ReadNumber(path + (v1 ? "/memory.limit_in_bytes" : "/memory.max"));
  const auto usage = ReadNumber(path + (v1 ? "/memory.usage_in_bytes" : "/memory.current"));
  if (!limit || !usage || *limit >= (uint64_t(1) << 60)) return m;  // v1's "no limit"
  // File pages the kernel can drop do not count against what is left.
  const uint64_t cache = ReadKey(path + "/memory.stat", v1 ? "total_cache" : "file").value_or(0);
  const uint64_t used = *usage > cache ? *usage - cache : 0;
  m.cgroup_limit = *limit;
  const uint64_t left = *limit > used ? *limit - used : 0;
  m.available = m.available ? std::min(m.available, left) : left;
  return m;
}

uint64_t ProcessResidentBytes() { return StatusBytes("VmRSS:"); }

uint64_t ProcessPeakResidentBytes() { return StatusBytes("VmHWM:"); }

}  // namespace anymoe
