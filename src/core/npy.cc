// .npy reader and writer. The header is a Python dict literal; we parse only the
// subset NumPy writes ({'descr': ..., 'fortran_order': False, 'shape': (...), })
// and reject anything else, so a hostile file cannot make us allocate or read
// more than the bytes it actually contains.
#include "core/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/mapped_file.h"

namespace anymoe {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr int kMaxRank = 32;

struct DescrName {
  std::string_view descr;
  NpyDType dtype;
};
constexpr DescrName kDescrs[] = {
    {"<f4", NpyDType::kF32}, {"<f2", NpyDType::kF16}, {"<i4", NpyDType::kI32},
    {"|u1", NpyDType::kU8},  {"<u1", NpyDType::kU8},
};

std::string_view DescrOf(NpyDType t) {
  for (const DescrName& d : kDescrs) {
    if (d.dtype == t) return d.descr;
  }
  return "?";
}

// Cursor over the header dict text.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view w) {
    SkipSpace();
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  // A quoted string without escapes ('...' or "...").
  bool String(std::string_view* out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    *out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool Int(int64_t* out) {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, int64_t(10), &v) ||
          __builtin_add_overflow(v, int64_t(text_[pos_] - '0'), &v)) {
        return false;
      }
      ++pos_;
    }
    *out = v;
    return pos_ > start;
  }
  // "(3, 4)", "(5,)" or "()".
  bool Shape(std::vector<int64_t>* shape) {
    if (!Consume('(')) return false;
    while (!Consume(')')) {
      int64_t d;
      if (!Int(&d) || int(shape->size()) >= kMaxRank) return false;
      shape->push_back(d);
      if (!Consume(',')) return Consume(')');
    }
    return true;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

Status ParseHeader(std::string_view text, const std::string& name, NpyArray* out) {
  const auto bad = [&](const std::string& what) {
    return Status::Error(name + ": .npy header " + what + ": " + std::string(text));
  };
  HeaderParser p(text);
  if (!p.Consume('{')) return bad("is not a dict");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!p.Consume('}')) {
    std::string_view key, descr;
    if (!p.String(&key) || !p.Consume(':')) return bad("has a malformed key");
    if (key == "descr" && !have_descr) {
      if (!p.String(&descr)) return bad("has a malformed descr");
      bool known = false;
      for (const DescrName& d : kDescrs) {
        if (d.descr == descr) out->dtype = d.dtype, known = true;
      }
      if (!known) return bad("has unsupported descr '" + std::string(descr) + "'");
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      if (p.ConsumeWord("True")) return bad("asks for Fortran order (unsupported)");
      if (!p.ConsumeWord("False")) return bad("has a malformed fortran_order");
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      if (!p.Shape(&out->shape)) return bad("has a malformed shape");
      have_shape = true;
    } else {
      return bad("has an unexpected or repeated key '" + std::string(key) + "'");
    }
    if (!p.Consume(',')) {
      if (!p.Consume('}')) return bad("is not a dict");
      break;
    }
  }
  if (!p.AtEnd()) return bad("has trailing text");
  if (!have_descr || !have_order || !have_shape) return bad("lacks descr, fortran_order or shape");
  return Status::Ok();
}

template <typename T>
Expected<std::vector<T>> CopyAs(const NpyArray& a, NpyDType want) {
  if (a.dtype != want) {
    return Status::Error("npy array holds " + std::string(NpyDTypeName(a.dtype)) + ", not " +
                         std::string(NpyDTypeName(want)));
  }
  std::vector<T> v(a.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace

std::string_view NpyDTypeName(NpyDType t) {
  switch (t) {
    case NpyDType::kF32:
      return "f32";
    case NpyDType::kF16:
      return "f16";
    case NpyDType::kI32:
      return "i32";
    case NpyDType::kU8:
      return "u8";
  }
  return "?";
}

int NpyDTypeSize(NpyDType t) {
  switch (t) {
    case NpyDType::kF32:
      return 4;
    case NpyDType::kF16:
      return 2;
    case NpyDType::kI32:
      return 4;
    case NpyDType::kU8:
      return 1;
  }
  return 1;
}

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow when read
  return n;
}

Expected<std::vector<float>> NpyArray::F32() const { return CopyAs<float>(*this, NpyDType::kF32); }
Expected<std::vector<uint16_t>> NpyArray::F16Bits() const {
  return CopyAs<uint16_t>(*this, NpyDType::kF16);
}
Expected<std::vector<int32_t>> NpyArray::I32() const {
  return CopyAs<int32_t>(*this, NpyDType::kI32);
}
Expected<std::vector<uint8_t>> NpyArray::U8() const {
  return CopyAs<uint8_t>(*this, NpyDType::kU8);
}

Expected<NpyArray> ParseNpy(std::span<const uint8_t> file, const std::string& name) {
  if (file.size() < kMagicLen + 4 || std::memcmp(file.data(), kMagic, kMagicLen) != 0) {
    return Status::Error(name + ": not a .npy file (bad magic)");
  }
  const uint8_t major = file[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = size_t(file[8]) | size_t(file[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return Status::Error(name + ": truncated .npy preamble");
    header_len =
        size_t(file[8]) | size_t(file[9]) << 8 | size_t(file[10]) << 16 | size_t(file[11]) << 24;
    header_start = 12;
  } else {
    return Status::Error(name + ": unsupported .npy version " + std::to_string(major));
  }
  if (header_len > file.size() - header_start) {
    return Status::Error(name + ": .npy header length " + std::to_string(header_len) +
                         " runs past end of file (size " + std::to_string(file.size()) + ")");
  }
  NpyArray a;
  const std::string_view text(reinterpret_cast<const char*>(file.data() + header_start),
                              header_len);
  RETURN_IF_ERROR(ParseHeader(text, name, &a));
  uint64_t bytes = uint64_t(NpyDTypeSize(a.dtype));
  for (int64_t d : a.shape) {
    if (__builtin_mul_overflow(bytes, uint64_t(d), &bytes)) {
      return Status::Error(name + ": .npy shape overflows a 64-bit byte count");
    }
  }
  const size_t data_start = header_start + header_len;
  if (bytes != file.size() - data_start) {
    return Status::Error(name + ": .npy data is " + std::to_string(file.size() - data_start) +
                         " bytes, shape and dtype need " + std::to_string(bytes));
  }
  a.bytes.assign(file.begin() + data_start, file.end());
  return a;
}

Expected<NpyArray> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(path));
  return ParseNpy(std::span<const uint8_t>(f->data(), f->size()), path);
}

Status WriteNpy(const std::string& path, NpyDType dtype, std::span<const int64_t> shape,
                const void* data) {
  uint64_t bytes = uint64_t(NpyDTypeSize(dtype));
  std::string shape_text = "(";
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes)) {
      return Status::Error(path + ": cannot write .npy: invalid shape");
    }
    shape_text += std::to_string(d) + (shape.size() == 1 ? ",)" : ", ");
  }
  if (shape.size() != 1) {
    if (!shape.empty()) shape_text.resize(shape_text.size() - 2);
    shape_text += ")";
  }
  std::string header = "{'descr': '" + std::string(DescrOf(dtype)) +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Pad with spaces so that the data starts on a 64-byte boundary; end with '\n'.
  const size_t unpadded = kMagicLen + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff) return Status::Error(path + ": cannot write .npy: header too long");

  std::string preamble(kMagic, kMagicLen);
  preamble += '\x01';
  preamble += '\x00';
  preamble += char(header.size() & 0xff);
  preamble += char(header.size() >> 8);

  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(preamble.data(), 1, preamble.size(), f) == preamble.size() &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes);
  const int write_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status::Error(path + ": cannot write: " + std::strerror(write_errno));
  return Status::Ok();
}

}  // namespace anymoe
