// Test helpers for the format readers: a temp folder per test, and a GGUF byte
// builder that can write valid files and deliberately broken ones (raw type ids,
// lengths and offsets), so hostile inputs are generated in the test, not committed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace anymoe::testing {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("anymoe_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const std::string p = Path(name);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return p;
  }
  std::string WriteText(const std::string& name, const std::string& text) const {
    return Write(name, std::vector<uint8_t>(text.begin(), text.end()));
  }

  std::filesystem::path dir_;
};

// Little-endian byte appenders.
inline void Put(std::vector<uint8_t>& b, const void* p, size_t n) {
  const uint8_t* u = static_cast<const uint8_t*>(p);
  b.insert(b.end(), u, u + n);
}
template <typename T>
void PutLE(std::vector<uint8_t>& b, T v) {
  Put(b, &v, sizeof(T));
}
inline void PutStr(std::vector<uint8_t>& b, const std::string& s) {
  PutLE<uint64_t>(b, s.size());
  Put(b, s.data(), s.size());
}

// GGUF value type ids.
enum : uint32_t {
  kTU8 = 0,
  kTI8,
  kTU16,
  kTI16,
  kTU32,
  kTI32,
  kTF32,
  kTBool,
  kTString,
  kTArray,
  kTU64,
  kTI64,
  kTF64
};

class GgufBuilder {
 public:
  struct Tensor {
    Tensor(std::string n, std::vector<uint64_t> dims, uint32_t t,
           std::optional<uint64_t> off = std::nullopt)
        : name(std::move(n)), ne(std::move(dims)), type(t), offset(off) {}
    std::string name;
    std::vector<uint64_t> ne;        // innermost first, as stored
    uint32_t type;                   // GGML type id
    std::optional<uint64_t> offset;  // default: next aligned offset; explicit ones
                                     // do not grow the data section
  };

  uint32_t version = 3;
  uint64_t alignment = 32;  // only for laying out data; add general.alignment yourself
  std::optional<uint64_t> n_kv_override, n_tensors_override;
  int64_t data_size_delta = 0;  // bytes added to (or cut from) the data section

  // A key with a raw value type and payload.
  GgufBuilder& Kv(const std::string& key, uint32_t type, std::vector<uint8_t> payload) {
    std::vector<uint8_t> b;
    PutStr(b, key);
    PutLE<uint32_t>(b, type);
    b.insert(b.end(), payload.begin(), payload.end());
    kvs_.push_back(std::move(b));
    return *this;
  }
  template <typename T>
  GgufBuilder& Scalar(const std::string& key, uint32_t type, T v) {
    std::vector<uint8_t> p;
    PutLE<T>(p, v);
    return Kv(key, type, p);
  }
  GgufBuilder& String(const std::string& key, const std::string& v) {
    std::vector<uint8_t> p;
    PutStr(p, v);
    return Kv(key, kTString, p);
  }
  template <typename T>
  GgufBuilder& Array(const std::string& key, uint32_t elem_type, const std::vector<T>& v) {
    std::vector<uint8_t> p;
    PutLE<uint32_t>(p, elem_type);
    PutLE<uint64_t>(p, v.size());
    for (const T& x : v) PutLE<T>(p, x);
    return Kv(key, kTArray, p);
  }
  GgufBuilder& StringArray(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> p;
    PutLE<uint32_t>(p, kTString);
    PutLE<uint64_t>(p, v.size());
    for (const std::string& s : v) PutStr(p, s);
    return Kv(key, kTArray, p);
  }
  GgufBuilder& AddTensor(Tensor t) {
    tensors_.push_back(std::move(t));
    return *this;
  }

  // Byte size of a tensor's data per anymoe's table (0 for unknown types).
  static uint64_t DataBytes(const Tensor& t) {
    const std::optional<DType> d = DTypeFromGgmlType(t.type);
    if (!d) return 0;
    uint64_t n = 1;
    for (uint64_t x : t.ne) {
      if (__builtin_mul_overflow(n, x, &n)) return 0;
    }
    Expected<uint64_t> b = BytesFor(*d, n);
    return b.ok() ? *b : 0;
  }

  std::vector<uint8_t> Build() const {
    std::vector<uint8_t> b;
    PutLE<uint32_t>(b, 0x46554747);
    PutLE<uint32_t>(b, version);
    PutLE<uint64_t>(b, n_tensors_override.value_or(tensors_.size()));
    PutLE<uint64_t>(b, n_kv_override.value_or(kvs_.size()));
    for (const auto& kv : kvs_) b.insert(b.end(), kv.begin(), kv.end());
    uint64_t next = 0, data_end = 0;
    for (const Tensor& t : tensors_) {
      PutStr(b, t.name);
      PutLE<uint32_t>(b, uint32_t(t.ne.size()));
      for (uint64_t x : t.ne) PutLE<uint64_t>(b, x);
      PutLE<uint32_t>(b, t.type);
      const uint64_t off = t.offset.value_or(next);
      PutLE<uint64_t>(b, off);
      if (t.offset) continue;
      const uint64_t end = off + DataBytes(t);
      next = (end + alignment - 1) / alignment * alignment;
      data_end = std::max(data_end, end);
    }
    if (tensors_.empty()) return b;
    if (data_end > (uint64_t(1) << 24)) data_end = 0;  // absurd sizes: write no data
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    const size_t data_start = b.size();
    b.resize(size_t(int64_t(data_start + data_end) + data_size_delta));
    for (size_t i = data_start; i < b.size(); ++i) b[i] = uint8_t(i * 7 + 1);
    return b;
  }

 private:
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<Tensor> tensors_;
};

inline ::testing::AssertionResult HasError(const Status& s, const std::string& needle) {
  if (s.ok())
    return ::testing::AssertionFailure() << "expected an error containing '" << needle << "'";
  if (s.message().find(needle) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "error '" << s.message() << "' lacks '" << needle << "'";
  }
  if (s.message().find('\n') != std::string::npos) {
    return ::testing::AssertionFailure() << "error is not one line: " << s.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace anymoe::testing
