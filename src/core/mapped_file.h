// A read-only memory map of a whole file. Weights are used in place from it
// (zero copy); all offsets read from the file must be validated against size().
// Mapping reads nothing: PopulateMappedRange faults a range in (the backends
// read each weight as they prepare it, so that no file is read whole at open).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace anymoe {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the OS reason.
  static Expected<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
};

// Reads the whole pages around [data, data + bytes) of a read-only mapping into
// memory and maps them, so that later accesses take no page fault. Best
// effort: errors are ignored, the pages then fault in on first use.
void PopulateMappedRange(const uint8_t* data, uint64_t bytes);

}  // namespace anymoe
