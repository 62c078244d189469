#include "formats/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "formats/tensor_source.h"

namespace anymoe {
namespace {

template <typename T>
void AppendLe(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void AppendString(std::vector<uint8_t>& out, std::string_view s) {
  AppendLe<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t PaddingTo(uint64_t n, uint64_t alignment) { return (alignment - n % alignment) % alignment; }

}  // namespace

void GgufWriter::Put(std::string_view key, std::vector<uint8_t> encoded) {
  for (Entry& e : kvs_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  kvs_.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::CopyValue(std::string_view key, const GgufValue& value) {
  std::vector<uint8_t> v;
  AppendLe<uint32_t>(v, uint32_t(value.type()));
  value.AppendEncoded(v);
  Put(key, std::move(v));
}

void GgufWriter::SetU32(std::string_view key, uint32_t value) {
  std::vector<uint8_t> v;
  AppendLe<uint32_t>(v, uint32_t(GgufType::kU32));
  AppendLe<uint32_t>(v, value);
  Put(key, std::move(v));
}

void GgufWriter::AddTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                           std::vector<std::span<const uint8_t>> pieces) {
  tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(pieces)});
}

Status GgufWriter::Write(const std::string& path) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  AppendLe<uint32_t>(head, 3);
  AppendLe<uint64_t>(head, tensors_.size());
  AppendLe<uint64_t>(head, kvs_.size());
  for (const Entry& e : kvs_) {
    AppendString(head, e.key);
    head.insert(head.end(), e.encoded.begin(), e.encoded.end());
  }
  uint64_t offset = 0;  // into the data section
  for (const PendingTensor& t : tensors_) {
    if (t.shape.empty() || t.shape.size() > 4) {
      return Status::Error(path + ": tensor '" + t.name + "' has " + std::to_string(t.shape.size()) +
                           " dimensions (GGUF takes 1 to 4)");
    }
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    uint64_t bytes = 0;
    for (const auto& p : t.pieces) bytes += p.size();
    const DTypeInfo& info = Info(t.dtype);
    if (t.dtype == DType::kF8_E4M3 || t.dtype == DType::kF8_E5M2 ||
        t.shape.back() % info.block_elems != 0 ||
        bytes != uint64_t(elements / info.block_elems) * uint64_t(info.block_bytes)) {
      return Status::Error(path + ": tensor '" + t.name + "': " + std::to_string(bytes) +
                           " bytes of " + std::string(info.name) + " do not make " +
                           ShapeString(t.shape) + " (or GGUF lacks the type)");
    }
    AppendString(head, t.name);
    AppendLe<uint32_t>(head, uint32_t(t.shape.size()));
    for (size_t d = t.shape.size(); d-- > 0;) AppendLe<uint64_t>(head, uint64_t(t.shape[d]));
    AppendLe<uint32_t>(head, GgmlTypeOf(t.dtype));
    AppendLe<uint64_t>(head, offset);
    offset += bytes + PaddingTo(bytes, alignment_);
  }
  head.resize(head.size() + PaddingTo(head.size(), alignment_), 0);

  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) return Status::Error(tmp + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(head.data(), 1, head.size(), f.get()) == head.size();
  static const uint8_t kZeros[256] = {};
  for (const PendingTensor& t : tensors_) {
    uint64_t bytes = 0;
    for (const auto& p : t.pieces) {
      ok = ok && std::fwrite(p.data(), 1, p.size(), f.get()) == p.size();
      bytes += p.size();
    }
    for (uint64_t pad = PaddingTo(bytes, alignment_); ok && pad > 0;) {
      const uint64_t n = std::min<uint64_t>(pad, sizeof(kZeros));
      ok = std::fwrite(kZeros, 1, n, f.get()) == n;
      pad -= n;
    }
  }
  ok = ok && std::fflush(f.get()) == 0;
  FILE* raw = f.release();
  ok = (std::fclose(raw) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::Error(path + ": cannot write: " + why);
  }
  return Status::Ok();
}

}  // namespace anymoe
