#include "models/experts/expert_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace anymoe {

Expected<std::unique_ptr<ExpertReader>> ExpertReader::Open(const std::vector<std::string>& paths,
                                                           bool direct, FaultHook hook) {
  std::unique_ptr<ExpertReader> r(new ExpertReader());
  r->paths_ = paths;
  r->hook_ = std::move(hook);
  r->direct_ = direct;
  for (const std::string& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::Error(p + ": cannot open for expert streaming: " + std::strerror(errno));
    r->fds_.push_back(fd);
    int dfd = -1;
#ifdef O_DIRECT
    if (direct) dfd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
#endif
    r->direct_fds_.push_back(dfd);
    r->direct_ &= dfd >= 0;  // e.g. tmpfs refuses O_DIRECT: buffered reads then
  }
  return r;
}

ExpertReader::~ExpertReader() {
  for (int fd : fds_) ::close(fd);
  for (int fd : direct_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

Status ExpertReader::ReadAll(int fd, uint64_t offset, uint64_t bytes, uint8_t* dst, uint64_t need,
                             const FileSpan& span) const {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, dst + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Status::Error(paths_[size_t(span.file)] + ": cannot read expert bytes at offset " +
                           std::to_string(span.offset) + ": " + std::strerror(errno));
    }
    if (n == 0) break;  // end of file
    done += uint64_t(n);
  }
  if (done < need) {
    return Status::Error(paths_[size_t(span.file)] + ": expert bytes [" +
                         std::to_string(span.offset) + ", +" + std::to_string(span.bytes) +
                         ") lie past the end of the file (was it truncated or replaced while "
                         "running?)");
  }
  return Status::Ok();
}

Status ExpertReader::Read(const FileSpan& span, uint8_t* dst, uint64_t* shift) const {
  if (span.file < 0 || size_t(span.file) >= fds_.size()) {
    return Status::Error("expert read names file " + std::to_string(span.file) + " of " +
                         std::to_string(fds_.size()));
  }
  if (hook_) RETURN_IF_ERROR(hook_(span));
  const int dfd = direct_fds_[size_t(span.file)];
  if (direct_ && dfd >= 0) {
    const uint64_t begin = span.offset / kAlign * kAlign;
    const uint64_t end = (span.offset + span.bytes + kAlign - 1) / kAlign * kAlign;
    *shift = span.offset - begin;
    // The last block may lie past the end of the file: only the span must be read.
    return ReadAll(dfd, begin, end - begin, dst, *shift + span.bytes, span);
  }
  *shift = 0;
  const int fd = fds_[size_t(span.file)];
  RETURN_IF_ERROR(ReadAll(fd, span.offset, span.bytes, dst, span.bytes, span));
  // The bytes now live in the cache slot: do not keep a second copy in the page cache.
  ::posix_fadvise(fd, off_t(span.offset), off_t(span.bytes), POSIX_FADV_DONTNEED);
  return Status::Ok();
}

}  // namespace anymoe
