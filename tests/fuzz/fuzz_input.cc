#include "fuzz_input.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace anymoe::fuzz {

std::string MemoryFile(const char* name, const uint8_t* data, size_t size) {
  static std::map<std::string, int> files;
  int& fd = files[name];
  if (fd == 0) {
    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
  }
  // Shrink first: the reader must see exactly `size` bytes.
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != ssize_t(size))) {
    std::perror("memfd write");
    std::abort();
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

std::string_view ExpandInput(const uint8_t* data, size_t size, size_t cap, std::string* storage) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  if (size < 6 || data[0] != kExpandMarker) return all;
  const int exponent = data[1] % 21;
  const std::string_view body = all.substr(6);
  size_t a = size_t(data[2]) | size_t(data[3]) << 8;
  size_t b = size_t(data[4]) | size_t(data[5]) << 8;
  a = std::min(a, body.size());
  b = std::clamp(b, a, body.size());
  const std::string_view prefix = body.substr(0, a), unit = body.substr(a, b - a),
                         suffix = body.substr(b);
  storage->clear();
  storage->reserve(std::min(cap, prefix.size() + (unit.size() << exponent) + suffix.size()));
  storage->append(prefix.substr(0, cap));
  for (size_t i = 0; i < (size_t(1) << exponent) && !unit.empty() && storage->size() < cap; ++i) {
    storage->append(unit.substr(0, cap - storage->size()));
  }
  storage->append(suffix.substr(0, cap - std::min(cap, storage->size())));
  return *storage;
}

namespace {
int64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
}  // namespace

CpuBudget::CpuBudget(const char* target, int64_t limit_ms)
    : target_(target), limit_ns_(limit_ms * 1000000), start_ns_(ThreadCpuNs()) {}

CpuBudget::~CpuBudget() {
  const int64_t used = ThreadCpuNs() - start_ns_;
  // Set when replaying an input by hand, to see how close it came.
  static const bool print = std::getenv("ANYMOE_FUZZ_PRINT_CPU") != nullptr;
  if (print) std::fprintf(stderr, "%s: %.3f s of CPU time\n", target_, double(used) * 1e-9);
  if (used > limit_ns_) {
    std::fprintf(stderr, "%s: timeout: one input took %.3f s of CPU time (limit %.3f s)\n", target_,
                 double(used) * 1e-9, double(limit_ns_) * 1e-9);
    std::abort();
  }
}

std::string GoldenDir() {
  if (const char* dir = std::getenv("ANYMOE_GOLDEN_DIR")) return dir;
  return ANYMOE_GOLDEN_DIR;
}

}  // namespace anymoe::fuzz
