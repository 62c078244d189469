// Reads routed experts' bytes from the model files by offset, for the expert
// cache's I/O threads. O_DIRECT where the file system takes it, so streamed
// experts do not also fill the page cache (which counts against a memory
// cgroup); else buffered reads whose pages are dropped after use. A short read
// (the file shrank) or an I/O error is a Status naming the file and offset,
// never a fault; a removed file keeps being read through the descriptor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/experts/expert_layout.h"

namespace anymoe {

class ExpertReader {
 public:
  // Called before every read (tests inject faults with it); an error fails the read.
  using FaultHook = std::function<Status(const FileSpan& span)>;
  static constexpr uint64_t kAlign = 4096;  // O_DIRECT offset, length and buffer alignment

  // Opens `paths` (ModelFile::mapped_files() order). `direct`: try O_DIRECT.
  static Expected<std::unique_ptr<ExpertReader>> Open(const std::vector<std::string>& paths,
                                                      bool direct, FaultHook hook = nullptr);
  ~ExpertReader();

  // Buffer bytes Read needs for `bytes` bytes (room for alignment either side).
  static uint64_t Capacity(uint64_t bytes) { return bytes + 2 * kAlign; }
  // Reads `span` into `dst` (kAlign-aligned, Capacity(span.bytes) bytes); the
  // span's first byte lands at dst + *shift. Thread-safe.
  Status Read(const FileSpan& span, uint8_t* dst, uint64_t* shift) const;
  bool direct() const { return direct_; }

 private:
  ExpertReader() = default;
  Status ReadAll(int fd, uint64_t offset, uint64_t bytes, uint8_t* dst, uint64_t need,
                 const FileSpan& span) const;

  std::vector<std::string> paths_;
  std::vector<int> fds_;         // buffered
  std::vector<int> direct_fds_;  // O_DIRECT, or -1
  bool direct_ = false;
  FaultHook hook_;
};

}  // namespace anymoe
