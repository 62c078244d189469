// GGUF parsing and validation (reliability.md §1.1, §1.5). The parser walks the
// file with a bounds-checked cursor; every length is checked against the bytes
// that remain before it is used, every size computation is overflow-checked, and
// errors are Status lines naming the file, the key or tensor, and the problem.
#include "formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "formats/parse_util.h"

namespace anymoe {

static_assert(std::endian::native == std::endian::little,
              "GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = 1 << 20;
constexpr uint64_t kMaxKeyBytes = 1 << 16;
constexpr uint64_t kMaxStringBytes = 64ull << 20;
constexpr uint64_t kMaxArrayElements = 64ull << 20;
// Real files have ~50 keys and ~3,000 tensors (experts are stacked per layer);
// these caps keep the index of a hostile file small (a key costs ~150 bytes
// of memory, a tensor ~250) whatever the file claims.
constexpr uint64_t kMaxKeyValues = 1 << 16;
constexpr uint64_t kMaxTensors = 1 << 16;
constexpr uint32_t kMaxDims = 4;
// Smallest possible encodings, used to bound counts by the bytes that remain.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;            // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

// Names of all GGML type ids, for messages about types anymoe cannot load.
std::string GgmlTypeName(uint32_t id) {
  static constexpr const char* kNames[] = {
      "f32",   "f16",        "q4_0",       "q4_1",       "q4_2",     "q4_3",     "q5_0",
      "q5_1",  "q8_0",       "q8_1",       "q2_k",       "q3_k",     "q4_k",     "q5_k",
      "q6_k",  "q8_k",       "iq2_xxs",    "iq2_xs",     "iq3_xxs",  "iq1_s",    "iq4_nl",
      "iq3_s", "iq2_s",      "iq4_xs",     "i8",         "i16",      "i32",      "i64",
      "f64",   "iq1_m",      "bf16",       "q4_0_4_4",   "q4_0_4_8", "q4_0_8_8", "tq1_0",
      "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",    "nvfp4",    "q1_0"};
  if (id < std::size(kNames)) {
    return std::string(kNames[id]) + " (ggml type " + std::to_string(id) + ")";
  }
  return "ggml type " + std::to_string(id);
}

int ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t t) { return t <= uint32_t(GgufType::kF64); }

bool IsInteger(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kI8 || t == GgufType::kU16 || t == GgufType::kI16 ||
         t == GgufType::kU32 || t == GgufType::kI32 || t == GgufType::kU64 || t == GgufType::kI64;
}

// Integer value of `raw` (zero-extended file bits) read as type `t`.
std::optional<__int128> IntFromRaw(GgufType t, uint64_t raw) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      return __int128(raw);
    case GgufType::kI8:
      return __int128(int8_t(raw));
    case GgufType::kI16:
      return __int128(int16_t(raw));
    case GgufType::kI32:
      return __int128(int32_t(raw));
    case GgufType::kI64:
      return __int128(int64_t(raw));
    default:
      return std::nullopt;
  }
}

std::optional<double> DoubleFromRaw(GgufType t, uint64_t raw) {
  if (t == GgufType::kF32) {
    float f;
    const uint32_t bits = uint32_t(raw);
    std::memcpy(&f, &bits, 4);
    return double(f);
  }
  if (t == GgufType::kF64) {
    double d;
    std::memcpy(&d, &raw, 8);
    return d;
  }
  return std::nullopt;
}

template <typename T>
std::optional<T> Narrow(std::optional<__int128> v) {
  if (!v || *v < __int128(std::numeric_limits<T>::min()) ||
      *v > __int128(std::numeric_limits<T>::max())) {
    return std::nullopt;
  }
  return T(*v);
}

}  // namespace

namespace {

template <typename T>
void AppendLe(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only, as the reader
  out.insert(out.end(), b, b + sizeof(T));
}

void AppendString(std::vector<uint8_t>& out, std::string_view s) {
  AppendLe<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

void GgufValue::AppendEncoded(std::vector<uint8_t>& out) const {
  if (type_ == GgufType::kString) return AppendString(out, string_);
  if (type_ != GgufType::kArray) {
    uint8_t b[8];
    std::memcpy(b, &raw_, 8);
    out.insert(out.end(), b, b + ScalarBytes(type_));
    return;
  }
  AppendLe<uint32_t>(out, uint32_t(element_type_));
  AppendLe<uint64_t>(out, array_size_);
  if (element_type_ == GgufType::kString) {
    for (std::string_view s : strings_) AppendString(out, s);
  } else if (array_size_ > 0) {
    out.insert(out.end(), array_data_, array_data_ + array_size_ * uint64_t(ScalarBytes(element_type_)));
  }
}

std::string_view GgufTypeName(GgufType t) {
  static constexpr std::string_view kNames[] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                "i32", "f32", "bool", "string", "array",
                                                "u64", "i64", "f64"};
  const uint32_t i = uint32_t(t);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

// ---- GgufValue -------------------------------------------------------------

std::optional<int64_t> GgufValue::AsInt() const { return Narrow<int64_t>(IntFromRaw(type_, raw_)); }
std::optional<uint64_t> GgufValue::AsUInt() const {
  return Narrow<uint64_t>(IntFromRaw(type_, raw_));
}
std::optional<double> GgufValue::AsDouble() const { return DoubleFromRaw(type_, raw_); }
std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return std::nullopt;
  return raw_ != 0;
}
std::optional<std::string_view> GgufValue::AsString() const {
  if (type_ != GgufType::kString) return std::nullopt;
  return string_;
}

std::optional<int64_t> GgufValue::IntAt(uint64_t i) const {
  if (!is_array() || i >= array_size_ || !IsInteger(element_type_)) return std::nullopt;
  const int n = ScalarBytes(element_type_);
  uint64_t raw = 0;
  std::memcpy(&raw, array_data_ + i * n, n);
  return Narrow<int64_t>(IntFromRaw(element_type_, raw));
}

std::optional<bool> GgufValue::BoolAt(uint64_t i) const {
  if (!is_array() || i >= array_size_ || element_type_ != GgufType::kBool) return std::nullopt;
  return array_data_[i] != 0;
}

std::optional<double> GgufValue::DoubleAt(uint64_t i) const {
  if (!is_array() || i >= array_size_ || array_data_ == nullptr) return std::nullopt;
  const int n = ScalarBytes(element_type_);
  uint64_t raw = 0;
  std::memcpy(&raw, array_data_ + i * n, n);
  return DoubleFromRaw(element_type_, raw);
}

std::string GgufValue::ToString(size_t max_elements) const {
  const auto scalar = [](GgufType t, uint64_t raw) -> std::string {
    if (t == GgufType::kBool) return raw ? "true" : "false";
    if (auto d = DoubleFromRaw(t, raw)) return std::to_string(*d);
    if (auto v = Narrow<int64_t>(IntFromRaw(t, raw))) return std::to_string(*v);
    return std::to_string(raw);  // u64 above INT64_MAX
  };
  if (type_ == GgufType::kString) return QuoteName(string_);
  if (!is_array()) return scalar(type_, raw_);
  std::string out = "[";
  for (uint64_t i = 0; i < array_size_ && i < max_elements; ++i) {
    if (i > 0) out += ", ";
    if (element_type_ == GgufType::kString) {
      out += QuoteName(strings_[i]);
    } else {
      const int n = ScalarBytes(element_type_);
      uint64_t raw = 0;
      std::memcpy(&raw, array_data_ + i * n, n);
      out += scalar(element_type_, raw);
    }
  }
  if (array_size_ > max_elements) out += ", ... (" + std::to_string(array_size_) + " items)";
  return out + "]";
}

// ---- Parser ----------------------------------------------------------------

// Reads one file into a GgufFile. `context_` says what is being read, so that
// every error, including truncation, names the key or tensor involved.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* out)
      : out_(out), data_(out->file_->data()), size_(out->file_->size()) {}

  Status Parse() {
    uint64_t n_tensors = 0, n_kv = 0;
    RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
    out_->kvs_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) RETURN_IF_ERROR(ReadKeyValue(i, n_kv));
    out_->tensors_.reserve(n_tensors);
    offsets_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) RETURN_IF_ERROR(ReadTensorInfo(i, n_tensors));
    return LocateTensorData();
  }

 private:
  Status Error(const std::string& what) const {
    return Status::Error(out_->path() + ": " + context_ + ": " + what);
  }
  uint64_t Remaining() const { return size_ - pos_; }

  Status Need(uint64_t n, std::string_view what) const {
    if (n <= Remaining()) return Status::Ok();
    return Error("truncated: " + std::string(what) + " needs " + std::to_string(n) +
                 " bytes at offset " + std::to_string(pos_) + ", only " +
                 std::to_string(Remaining()) + " remain (file size " + std::to_string(size_) + ")");
  }

  template <typename T>
  Expected<T> Read(std::string_view what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A view of the string's bytes in the mapping.
  Expected<std::string_view> ReadString(uint64_t cap, std::string_view what) {
    ASSIGN_OR_RETURN(const uint64_t len, Read<uint64_t>(what));
    if (len > cap) {
      return Error(std::string(what) + " length " + std::to_string(len) + " exceeds the limit " +
                   std::to_string(cap));
    }
    RETURN_IF_ERROR(Need(len, what));
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    context_ = "header";
    ASSIGN_OR_RETURN(const uint32_t magic, Read<uint32_t>("magic"));
    if (magic != kMagic) return Error("not a GGUF file (bad magic)");
    ASSIGN_OR_RETURN(const uint32_t version, Read<uint32_t>("version"));
    if (version == 0x02000000u || version == 0x03000000u) {
      return Error("big-endian GGUF is not supported");
    }
    if (version != 2 && version != 3) {
      return Error("unsupported GGUF version " + std::to_string(version) + " (need 2 or 3)");
    }
    out_->version_ = version;
    ASSIGN_OR_RETURN(*n_tensors, Read<uint64_t>("tensor count"));
    ASSIGN_OR_RETURN(*n_kv, Read<uint64_t>("metadata count"));
    RETURN_IF_ERROR(CheckCount("metadata count", *n_kv, kMinKeyValueBytes, kMaxKeyValues));
    return CheckCount("tensor count", *n_tensors, kMinTensorInfoBytes, kMaxTensors);
  }

  Status CheckCount(std::string_view what, uint64_t n, uint64_t min_bytes, uint64_t cap) const {
    if (n > cap) {
      return Error(std::string(what) + " " + std::to_string(n) + " exceeds the limit " +
                   std::to_string(cap));
    }
    if (n > Remaining() / min_bytes) {
      return Error(std::string(what) + " " + std::to_string(n) + " cannot fit in the " +
                   std::to_string(Remaining()) + " bytes that remain");
    }
    return Status::Ok();
  }

  Status ReadKeyValue(uint64_t i, uint64_t n) {
    context_ = "metadata #" + std::to_string(i) + " of " + std::to_string(n);
    ASSIGN_OR_RETURN(std::string_view key, ReadString(kMaxKeyBytes, "key"));
    context_ = "metadata key " + QuoteName(key);
    if (out_->kv_index_.count(key) != 0) return Error("duplicate key");
    ASSIGN_OR_RETURN(const uint32_t type, Read<uint32_t>("value type"));
    if (!IsKnownType(type)) return Error("unknown value type " + std::to_string(type));
    GgufValue value;
    RETURN_IF_ERROR(ReadValue(GgufType(type), &value));
    if (key == "general.alignment") RETURN_IF_ERROR(ApplyAlignment(value));
    out_->kv_index_.emplace(key, out_->kvs_.size());
    out_->kvs_.push_back({key, std::move(value)});
    return Status::Ok();
  }

  Status ReadValue(GgufType type, GgufValue* v) {
    v->type_ = type;
    if (type == GgufType::kString) {
      ASSIGN_OR_RETURN(v->string_, ReadString(kMaxStringBytes, "string value"));
      return Status::Ok();
    }
    if (type == GgufType::kArray) return ReadArray(v);
    const int n = ScalarBytes(type);
    RETURN_IF_ERROR(Need(n, "value"));
    std::memcpy(&v->raw_, data_ + pos_, n);
    pos_ += n;
    if (type == GgufType::kBool && v->raw_ > 1) {
      return Error("bool value " + std::to_string(v->raw_) + " is neither 0 nor 1");
    }
    return Status::Ok();
  }

  Status ReadArray(GgufValue* v) {
    ASSIGN_OR_RETURN(const uint32_t elem, Read<uint32_t>("array element type"));
    if (!IsKnownType(elem)) return Error("unknown array element type " + std::to_string(elem));
    if (GgufType(elem) == GgufType::kArray) return Error("nested arrays are not supported");
    v->element_type_ = GgufType(elem);
    ASSIGN_OR_RETURN(const uint64_t count, Read<uint64_t>("array length"));
    const bool strings = v->element_type_ == GgufType::kString;
    const uint64_t min_elem_bytes = strings ? 8 : uint64_t(ScalarBytes(v->element_type_));
    if (count > kMaxArrayElements) {
      return Error("array length " + std::to_string(count) + " exceeds the limit " +
                   std::to_string(kMaxArrayElements));
    }
    if (count > Remaining() / min_elem_bytes) {
      return Error("array of " + std::to_string(count) + " " +
                   std::string(GgufTypeName(v->element_type_)) + " cannot fit in the " +
                   std::to_string(Remaining()) + " bytes that remain");
    }
    v->array_size_ = count;
    if (strings) {
      v->strings_.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(std::string_view s, ReadString(kMaxStringBytes, "array string"));
        v->strings_.push_back(s);
      }
      return Status::Ok();
    }
    v->array_data_ = data_ + pos_;
    pos_ += count * min_elem_bytes;  // fits: checked against Remaining() above
    if (v->element_type_ == GgufType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        if (v->array_data_[i] > 1)
          return Error("bool array element " + std::to_string(i) + " is neither 0 nor 1");
      }
    }
    return Status::Ok();
  }

  Status ApplyAlignment(const GgufValue& v) {
    if (v.type() != GgufType::kU32) {
      return Error("must be u32, found " + std::string(GgufTypeName(v.type())));
    }
    const uint64_t a = *v.AsUInt();
    if (a == 0 || a > kMaxAlignment || !std::has_single_bit(a)) {
      return Error("alignment " + std::to_string(a) + " is not a power of two in [1, " +
                   std::to_string(kMaxAlignment) + "]");
    }
    out_->alignment_ = a;
    return Status::Ok();
  }

  Status ReadTensorInfo(uint64_t i, uint64_t n) {
    context_ = "tensor #" + std::to_string(i) + " of " + std::to_string(n);
    ASSIGN_OR_RETURN(const std::string_view name_view, ReadString(kMaxKeyBytes, "tensor name"));
    std::string name(name_view);
    context_ = "tensor " + QuoteName(name);
    if (out_->tensor_index_.count(name) != 0) return Error("duplicate tensor name");
    ASSIGN_OR_RETURN(const uint32_t n_dims, Read<uint32_t>("dimension count"));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return Error("dimension count " + std::to_string(n_dims) + " is not in [1, 4]");
    }
    std::vector<int64_t> shape(n_dims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(const uint64_t ne, Read<uint64_t>("dimension"));
      if (ne == 0 || ne > uint64_t(INT64_MAX)) {
        return Error("dimension " + std::to_string(d) + " is " + std::to_string(ne));
      }
      if (__builtin_mul_overflow(elements, ne, &elements) || elements > uint64_t(INT64_MAX)) {
        return Error("element count overflows (dimension " + std::to_string(d) + " is " +
                     std::to_string(ne) + ")");
      }
      shape[n_dims - 1 - d] = int64_t(ne);  // GGUF ne[] is innermost-first
    }
    ASSIGN_OR_RETURN(const uint32_t ggml_type, Read<uint32_t>("type"));
    const std::optional<DType> dtype = DTypeFromGgmlType(ggml_type);
    if (!dtype) return Error("unsupported tensor type " + GgmlTypeName(ggml_type));
    ASSIGN_OR_RETURN(const uint64_t offset, Read<uint64_t>("data offset"));
    const int64_t row = shape.back();
    const int block = Info(*dtype).block_elems;
    if (row % block != 0) {
      return Error("row of " + std::to_string(row) + " elements is not a whole number of " +
                   std::string(Name(*dtype)) + " blocks (" + std::to_string(block) + ")");
    }
    Expected<uint64_t> bytes = BytesFor(*dtype, elements);
    if (!bytes.ok()) return Error(bytes.status().message());
    out_->tensor_index_.emplace(name, out_->tensors_.size());
    out_->tensors_.push_back(
        TensorInfo{std::move(name), *dtype, std::move(shape), nullptr, *bytes});
    offsets_.push_back(offset);
    return Status::Ok();
  }

  // Places the data section after the tensor infos and checks each tensor's
  // [offset, offset + bytes) lies inside it, is aligned and overlaps no other.
  Status LocateTensorData() {
    const uint64_t a = out_->alignment_;
    out_->data_offset_ = (pos_ + (a - 1)) / a * a;  // pos_ <= size_ and a <= 1 MiB: no overflow
    std::vector<size_t> order(out_->tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) {
      RETURN_IF_ERROR(PlaceTensor(i));
      order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return offsets_[x] < offsets_[y]; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = out_->tensors_[order[k - 1]];
      const TensorInfo& cur = out_->tensors_[order[k]];
      if (offsets_[order[k]] < offsets_[order[k - 1]] + prev.bytes) {
        context_ = "tensor " + QuoteName(cur.name);
        return Error("data at offset " + std::to_string(offsets_[order[k]]) + " overlaps tensor " +
                     QuoteName(prev.name) + " [offset " + std::to_string(offsets_[order[k - 1]]) +
                     ", " + std::to_string(prev.bytes) + " bytes]");
      }
    }
    return Status::Ok();
  }

  Status PlaceTensor(size_t i) {
    TensorInfo& t = out_->tensors_[i];
    context_ = "tensor " + QuoteName(t.name);
    const uint64_t offset = offsets_[i];
    if (offset % out_->alignment_ != 0) {
      return Error("data offset " + std::to_string(offset) +
                   " is not a multiple of the alignment " + std::to_string(out_->alignment_));
    }
    uint64_t begin, end;
    if (__builtin_add_overflow(out_->data_offset_, offset, &begin) ||
        __builtin_add_overflow(begin, t.bytes, &end) || end > size_) {
      return Error("data [offset " + std::to_string(out_->data_offset_) + " + " +
                   std::to_string(offset) + ", " + std::to_string(t.bytes) +
                   " bytes] ends past end of file (size " + std::to_string(size_) + ")");
    }
    t.data = data_ + begin;
    return Status::Ok();
  }

  GgufFile* out_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string context_;
  std::vector<uint64_t> offsets_;  // per tensor, relative to the data section
};

// ---- GgufFile --------------------------------------------------------------

Expected<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  std::unique_ptr<GgufFile> gguf(new GgufFile());
  gguf->file_ = std::move(file);
  gguf->alignment_ = kDefaultAlignment;
  RETURN_IF_ERROR(GgufParser(gguf.get()).Parse());
  return gguf;
}

const GgufValue* GgufFile::FindValue(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const TensorInfo* GgufFile::Find(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::KeyError(std::string_view key, const std::string& what) const {
  return Status::Error(path() + ": metadata key " + QuoteName(key) + " " + what);
}

Expected<const GgufValue*> GgufFile::Require(std::string_view key) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return KeyError(key, "is missing");
  return v;
}

namespace {

std::string Describe(const GgufValue& v) {
  if (v.is_array()) return "an array of " + std::string(GgufTypeName(v.element_type()));
  return std::string(GgufTypeName(v.type())) + " " + v.ToString();
}

// Conversions used by the typed getters; nullopt when the value does not fit.
std::optional<std::string> ToString(const GgufValue& v) {
  const std::optional<std::string_view> s = v.AsString();
  return s ? std::optional<std::string>(*s) : std::nullopt;
}
std::optional<uint32_t> ToU32(const GgufValue& v) {
  const std::optional<uint64_t> u = v.AsUInt();
  if (!u || *u > UINT32_MAX) return std::nullopt;
  return uint32_t(*u);
}
std::optional<uint64_t> ToU64(const GgufValue& v) { return v.AsUInt(); }
std::optional<int64_t> ToI64(const GgufValue& v) { return v.AsInt(); }
std::optional<float> ToF32(const GgufValue& v) {
  const std::optional<double> d = v.AsDouble();
  if (!d || (std::isfinite(*d) && std::fabs(*d) > FLT_MAX)) return std::nullopt;
  return float(*d);
}
std::optional<bool> ToBool(const GgufValue& v) { return v.AsBool(); }

}  // namespace

// Converts a present value or explains why it cannot; absent keys give nullopt.
template <typename T>
Expected<std::optional<T>> GgufFile::FindAs(std::string_view key,
                                            std::optional<T> (*convert)(const GgufValue&),
                                            std::string_view expected) const {
  const GgufValue* v = FindValue(key);
  if (v == nullptr) return std::optional<T>();
  std::optional<T> out = convert(*v);
  if (!out) return KeyError(key, "is " + Describe(*v) + ", expected " + std::string(expected));
  return out;
}

template <typename T>
Expected<T> GgufFile::GetAs(std::string_view key, std::optional<T> (*convert)(const GgufValue&),
                            std::string_view expected) const {
  ASSIGN_OR_RETURN(std::optional<T> v, FindAs<T>(key, convert, expected));
  if (!v) return KeyError(key, "is missing");
  return *std::move(v);
}

Expected<std::optional<std::string>> GgufFile::FindString(std::string_view key) const {
  return FindAs<std::string>(key, ToString, "a string");
}
Expected<std::optional<uint32_t>> GgufFile::FindU32(std::string_view key) const {
  return FindAs<uint32_t>(key, ToU32, "an integer in u32 range");
}
Expected<std::optional<uint64_t>> GgufFile::FindU64(std::string_view key) const {
  return FindAs<uint64_t>(key, ToU64, "an integer in u64 range");
}
Expected<std::optional<int64_t>> GgufFile::FindI64(std::string_view key) const {
  return FindAs<int64_t>(key, ToI64, "an integer in i64 range");
}
Expected<std::optional<float>> GgufFile::FindF32(std::string_view key) const {
  return FindAs<float>(key, ToF32, "f32 or f64 in f32 range");
}
Expected<std::optional<bool>> GgufFile::FindBool(std::string_view key) const {
  return FindAs<bool>(key, ToBool, "a bool");
}
Expected<std::string> GgufFile::GetString(std::string_view key) const {
  return GetAs<std::string>(key, ToString, "a string");
}
Expected<uint32_t> GgufFile::GetU32(std::string_view key) const {
  return GetAs<uint32_t>(key, ToU32, "an integer in u32 range");
}
Expected<uint64_t> GgufFile::GetU64(std::string_view key) const {
  return GetAs<uint64_t>(key, ToU64, "an integer in u64 range");
}
Expected<int64_t> GgufFile::GetI64(std::string_view key) const {
  return GetAs<int64_t>(key, ToI64, "an integer in i64 range");
}
Expected<float> GgufFile::GetF32(std::string_view key) const {
  return GetAs<float>(key, ToF32, "f32 or f64 in f32 range");
}
Expected<bool> GgufFile::GetBool(std::string_view key) const {
  return GetAs<bool>(key, ToBool, "a bool");
}

Expected<std::span<const std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Require(key));
  if (!v->is_array() || v->element_type() != GgufType::kString) {
    return KeyError(key, "is " + Describe(*v) + ", expected an array of strings");
  }
  return v->strings();
}

Expected<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Require(key));
  if (!v->is_array() ||
      (v->element_type() != GgufType::kF32 && v->element_type() != GgufType::kF64)) {
    return KeyError(key, "is " + Describe(*v) + ", expected an array of f32");
  }
  std::vector<float> out(v->array_size());
  for (uint64_t i = 0; i < out.size(); ++i) out[i] = float(*v->DoubleAt(i));
  return out;
}

Expected<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, Require(key));
  if (!v->is_array() || !IsInteger(v->element_type())) {
    return KeyError(key, "is " + Describe(*v) + ", expected an array of integers");
  }
  std::vector<int32_t> out(v->array_size());
  for (uint64_t i = 0; i < out.size(); ++i) {
    const std::optional<int64_t> x = v->IntAt(i);
    if (!x || *x < INT32_MIN || *x > INT32_MAX) {
      return KeyError(key, "element " + std::to_string(i) + " does not fit in i32");
    }
    out[i] = int32_t(*x);
  }
  return out;
}

}  // namespace anymoe
