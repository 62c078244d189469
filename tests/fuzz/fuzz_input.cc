#include "fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

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

std::string GoldenDir() {
  if (const char* dir = std::getenv("ANYMOE_GOLDEN_DIR")) return dir;
  return ANYMOE_GOLDEN_DIR;
}

}  // namespace anymoe::fuzz
