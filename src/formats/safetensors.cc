// safetensors parsing. A shard is `u64 N | N bytes of JSON header | data`; the
// header maps tensor names to {dtype, shape, data_offsets} relative to the data
// section. We enforce the reference reader's rules (§1.4): header bounds, a strict
// JSON object, exact sizes with checked arithmetic, and a data section tiled by
// the tensors with no gap, overlap or trailing bytes.
#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "formats/parse_util.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSingleName[] = "model.safetensors";
constexpr uint64_t kMaxDim = (uint64_t(1) << 48) - 1;  // the format schema's cap
constexpr int kMaxHeaderDepth = 8;                     // real headers nest 3 deep

struct SupportedDType {
  std::string_view name;
  DType dtype;
  uint64_t bytes;
};
constexpr SupportedDType kDTypes[] = {
    {"F32", DType::kF32, 4}, {"F16", DType::kF16, 2},         {"BF16", DType::kBF16, 2},
    {"I32", DType::kI32, 4}, {"F8_E4M3", DType::kF8_E4M3, 1}, {"F8_E5M2", DType::kF8_E5M2, 1},
};

// One header entry before it is placed in the mmap.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data section
};

Status TensorError(const std::string& path, std::string_view name, const std::string& what) {
  return Status::Error(path + ": tensor " + QuoteName(name) + ": " + what);
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> AsUnsigned(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

// Returns the header text after checking its length against the file.
Expected<std::string_view> HeaderText(const MappedFile& f) {
  const std::string& path = f.path();
  if (f.size() < 8) {
    return Status::Error(path + ": file is " + std::to_string(f.size()) +
                         " bytes, too small for the 8-byte safetensors header length");
  }
  uint64_t n;
  std::memcpy(&n, f.data(), 8);
  if (n > SafetensorsModel::kMaxHeaderBytes) {
    return Status::Error(path + ": header length " + std::to_string(n) + " exceeds the " +
                         std::to_string(SafetensorsModel::kMaxHeaderBytes) + "-byte limit");
  }
  if (n > f.size() - 8) {
    return Status::Error(path + ": header length " + std::to_string(n) +
                         " runs past end of file (size " + std::to_string(f.size()) + ")");
  }
  const std::string_view text(reinterpret_cast<const char*>(f.data() + 8), n);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') {
    return Status::Error(path + ": header is not a JSON object");
  }
  return text;
}

Status ParseMetadata(const std::string& path, const Json& v,
                     std::map<std::string, std::string>* out) {
  if (!v.is_object()) return Status::Error(path + ": __metadata__ is not an object");
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return Status::Error(path + ": __metadata__ value of " + QuoteName(key) + " is not a string");
    }
    (*out)[key] = value.get<std::string>();
  }
  return Status::Ok();
}

Status ParseShape(const std::string& path, const std::string& name, const Json& v, Entry* e) {
  if (!v.is_array()) return TensorError(path, name, "shape is not an array");
  for (const Json& d : v) {
    const std::optional<uint64_t> dim = AsUnsigned(d);
    if (!dim || *dim > kMaxDim) {
      return TensorError(path, name, "shape " + v.dump() + " has an invalid dimension");
    }
    e->shape.push_back(int64_t(*dim));
  }
  return Status::Ok();
}

Expected<Entry> ParseEntry(const std::string& path, const std::string& name, const Json& v) {
  if (!v.is_object()) return TensorError(path, name, "entry is not an object");
  Entry e;
  e.name = name;
  for (const auto& [field, value] : v.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      return TensorError(path, name, "unexpected field " + QuoteName(field));
    }
  }
  const auto dtype_it = v.find("dtype");
  const auto shape_it = v.find("shape");
  const auto offsets_it = v.find("data_offsets");
  if (dtype_it == v.end() || shape_it == v.end() || offsets_it == v.end()) {
    return TensorError(path, name, "entry needs dtype, shape and data_offsets");
  }
  if (!dtype_it->is_string()) return TensorError(path, name, "dtype is not a string");
  const std::string dtype = dtype_it->get<std::string>();
  const SupportedDType* supported = nullptr;
  for (const SupportedDType& s : kDTypes) {
    if (s.name == dtype) supported = &s;
  }
  if (supported == nullptr) {
    return TensorError(
        path, name,
        "dtype " + QuoteName(dtype) +
            " is not supported (anymoe loads F32, F16, BF16, I32, F8_E4M3, F8_E5M2)");
  }
  e.dtype = supported->dtype;
  RETURN_IF_ERROR(ParseShape(path, name, *shape_it, &e));
  const Json& offsets = *offsets_it;
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = AsUnsigned(offsets[0]);
    end = AsUnsigned(offsets[1]);
  }
  if (!begin || !end) {
    return TensorError(path, name, "data_offsets must be two non-negative integers");
  }
  if (*begin > *end) {
    return TensorError(path, name,
                       "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                           "] end before they begin");
  }
  uint64_t bytes = supported->bytes;
  for (int64_t d : e.shape) {
    if (__builtin_mul_overflow(bytes, uint64_t(d), &bytes)) {
      return TensorError(path, name, "shape " + ShapeString(e.shape) + " overflows a byte count");
    }
  }
  if (bytes != *end - *begin) {
    return TensorError(path, name,
                       "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                           "] hold " + std::to_string(*end - *begin) + " bytes, but " + dtype +
                           " " + ShapeString(e.shape) + " needs " + std::to_string(bytes));
  }
  e.begin = *begin;
  e.end = *end;
  return e;
}

// The tensors must tile the data section exactly: sorted by offset, each begins
// where the previous ended, the first at 0 and the last at the end of the file.
Status CheckTiling(const std::string& path, std::vector<Entry>& entries, uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    const std::string where =
        "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.end > data_bytes) {
      return TensorError(
          path, e.name,
          where + " run past the " + std::to_string(data_bytes) + "-byte data section");
    }
    if (e.begin < cursor) {
      return TensorError(path, e.name, where + " overlap tensor " + QuoteName(prev->name));
    }
    if (e.begin > cursor) {
      return TensorError(
          path, e.name,
          where + " leave a gap after byte " + std::to_string(cursor) + " of the data section");
    }
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_bytes) {
    return Status::Error(path + ": " + std::to_string(data_bytes - cursor) +
                         " trailing bytes after the last tensor");
  }
  return Status::Ok();
}

// A shard name from an index must be a plain file name inside the model folder.
bool IsBareFileName(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

Status SafetensorsModel::AddShard(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(const std::string_view text, HeaderText(*file));
  // Each member of the header is read as soon as the parser completes it and
  // only its Entry is kept: memory follows the tensors, never a JSON tree of
  // the whole (up to 100 MB) header.
  SafetensorsShard shard;
  std::vector<Entry> entries;
  JsonDomBuilder builder(JsonLimits{kMaxHeaderDepth, true});
  Status entry_error;
  bool seen_metadata = false;
  builder.StreamChildren({}, [&](std::string_view name, size_t, Json&& value) {
    Status st = Status::Ok();
    if (name == "__metadata__" && seen_metadata) {
      st = Status::Error(path + ": duplicate JSON key " + QuoteName(name));
    } else if (name == "__metadata__") {
      seen_metadata = true;
      st = ParseMetadata(path, value, &shard.metadata);
    } else {
      Expected<Entry> e = ParseEntry(path, std::string(name), value);
      if (e.ok()) {
        entries.push_back(std::move(e).value());
      } else {
        st = e.status();
      }
    }
    if (st.ok()) return true;
    entry_error = st;
    return builder.Fail(st.message());
  });
  if (Status st = ParseJsonWith(text, path, builder); !st.ok()) {
    return entry_error.ok() ? st : entry_error;
  }
  if (!builder.root().is_object()) return Status::Error(path + ": header is not a JSON object");
  {
    // Streamed members are not checked for duplicates by the parser: sort names.
    std::vector<uint32_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return entries[a].name < entries[b].name; });
    for (size_t i = 1; i < order.size(); ++i) {
      if (entries[order[i]].name == entries[order[i - 1]].name) {
        return Status::Error(path + ": duplicate JSON key " + QuoteName(entries[order[i]].name));
      }
    }
  }
  const uint64_t data_start = 8 + text.size();
  RETURN_IF_ERROR(CheckTiling(path, entries, file->size() - data_start));

  const size_t shard_index = shards_.size();
  tensors_.reserve(tensors_.size() + entries.size());  // no doubling of a large table
  shard_of_.reserve(shard_of_.size() + entries.size());
  for (Entry& e : entries) {
    if (auto it = index_.find(e.name); it != index_.end()) {
      return TensorError(path, e.name,
                         "also present in " + shards_[shard_of_[it->second]].file->path());
    }
    index_.emplace(e.name, tensors_.size());
    tensors_.push_back(TensorInfo{std::move(e.name), e.dtype, std::move(e.shape),
                                  file->data() + data_start + e.begin, e.end - e.begin});
    shard_of_.push_back(shard_index);
  }
  shard.file = std::move(file);
  shards_.push_back(std::move(shard));
  return Status::Ok();
}

Status SafetensorsModel::OpenIndex(const std::string& index_path) {
  ASSIGN_OR_RETURN(Json index, ReadJsonFile(index_path, kMaxIndexBytes));
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) {
    return Status::Error(index_path + ": no \"weight_map\" object");
  }
  const fs::path dir = fs::path(index_path).parent_path();
  std::set<std::string> shard_names;
  for (const auto& [name, shard] : map_it->items()) {
    if (!shard.is_string() || !IsBareFileName(shard.get<std::string>())) {
      return TensorError(index_path, name, "shard must be a file name in the model folder");
    }
    shard_names.insert(shard.get<std::string>());
  }
  for (const std::string& shard : shard_names) RETURN_IF_ERROR(AddShard((dir / shard).string()));
  for (const auto& [name, shard] : map_it->items()) {
    const std::string shard_path = (dir / shard.get<std::string>()).string();
    const TensorInfo* t = Find(name);
    if (t == nullptr) {
      return TensorError(index_path, name, "mapped to " + shard_path + ", which lacks it");
    }
    const std::string& actual = shards_[ShardOf(*t)].file->path();
    if (actual != shard_path) {
      return TensorError(index_path, name, "mapped to " + shard_path + " but found in " + actual);
    }
  }
  return Status::Ok();
}

Expected<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(
    const std::string& path, const Fp8Quantization& quantization) {
  std::unique_ptr<SafetensorsModel> model(new SafetensorsModel());
  model->description_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / kIndexName;
    const fs::path single = fs::path(path) / kSingleName;
    if (fs::exists(index, ec)) {
      RETURN_IF_ERROR(model->OpenIndex(index.string()));
    } else if (fs::exists(single, ec)) {
      RETURN_IF_ERROR(model->AddShard(single.string()));
    } else {
      return Status::Error(path + ": folder has neither " + kIndexName + " nor " + kSingleName);
    }
  } else if (path.ends_with(".json")) {
    RETURN_IF_ERROR(model->OpenIndex(path));
  } else {
    RETURN_IF_ERROR(model->AddShard(path));
  }
  auto find = [](const void* ctx, const std::string& name) {
    return static_cast<const SafetensorsModel*>(ctx)->Find(name);
  };
  RETURN_IF_ERROR(
      AttachFp8Scales(model->description_, model->tensors_, find, model.get(), quantization));
  return model;
}

bool SafetensorsModel::HasPrefix(std::string_view prefix) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name.starts_with(prefix)) return true;
  }
  return false;
}

size_t SafetensorsModel::KeepPrefixed(std::string_view prefix, std::string_view renamed,
                                      std::string_view keep) {
  std::vector<TensorInfo> kept;
  std::vector<size_t> kept_shard;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const bool moved = tensors_[i].name.starts_with(prefix);
    if (!moved && (keep.empty() || !tensors_[i].name.starts_with(keep))) continue;
    kept.push_back(std::move(tensors_[i]));
    if (moved) kept.back().name.replace(0, prefix.size(), renamed);
    kept_shard.push_back(shard_of_[i]);
  }
  const size_t dropped = tensors_.size() - kept.size();
  tensors_ = std::move(kept);
  shard_of_ = std::move(kept_shard);
  index_.clear();
  // Unique: the prefixed names were, one prefix is replaced in each, and no
  // wrapper's renamed prefix ("model.") starts its kept one ("lm_head.").
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  return dropped;
}

const TensorInfo* SafetensorsModel::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace anymoe
