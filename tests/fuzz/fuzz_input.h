// Helpers shared by the fuzz targets: hand the fuzzer's bytes to readers that
// take a path (the model-file readers mmap files) and locate golden data;
// expand small inputs into large ones (parsers must stay linear up to their
// caps, and libFuzzer's own inputs stay small); fail an input that takes more
// than a second of CPU time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace anymoe::fuzz {

// Splits fuzzer bytes into typed values (a small stand-in for libFuzzer's
// FuzzedDataProvider, so the targets also build with gcc for corpus replay).
// Reading past the end gives zeros and empty strings.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - pos_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Bool() { return (Byte() & 1) != 0; }
  // A value in [0, n).
  size_t Below(size_t n) {
    const size_t v = size_t(Byte()) | size_t(Byte()) << 8;
    return n == 0 ? 0 : v % n;
  }
  // Up to `max_len` bytes; the length comes from the input.
  std::string String(size_t max_len) {
    size_t n = Below(max_len + 1);
    if (n > remaining()) n = remaining();
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::string_view Rest() {
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), remaining());
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Replaces the contents of one in-memory file (memfd, one per process and
// name) with `data` and returns a path that opens it ("/proc/self/fd/N").
// The file lives in RAM, so a fuzz iteration costs no disk I/O.
std::string MemoryFile(const char* name, const uint8_t* data, size_t size);

// The tests/golden folder of the source tree this target was built from.
std::string GoldenDir();

// Large inputs from small ones (issue 20: quadratic parsing hid behind the
// fuzzers' 64 KiB inputs). An input that starts with kExpandMarker is a
// recipe, not a document:
//   0xA5 | e (1 byte) | a (2 bytes LE) | b (2 bytes LE) | body
// and stands for body[0, a) + body[a, b) repeated 2^(e mod 21) times +
// body[b, end), cut at `cap` bytes (a, b clamped to the body). So a dozen
// bytes become `{"x":[` + a million `{},` + `{}]}`. Any other input is
// returned as it is.
inline constexpr uint8_t kExpandMarker = 0xA5;
std::string_view ExpandInput(const uint8_t* data, size_t size, size_t cap, std::string* storage);

// Aborts (a crash libFuzzer records, with the input) when the scope used
// more than `limit_ms` of this thread's CPU time: an input slower than a
// second is a failure however loaded the machine is (libFuzzer's -timeout
// counts wall time, which a busy shared machine stretches).
class CpuBudget {
 public:
  explicit CpuBudget(const char* target, int64_t limit_ms = 1000);
  ~CpuBudget();
  CpuBudget(const CpuBudget&) = delete;
  CpuBudget& operator=(const CpuBudget&) = delete;

 private:
  const char* target_;
  int64_t limit_ns_;
  int64_t start_ns_;
};

}  // namespace anymoe::fuzz
