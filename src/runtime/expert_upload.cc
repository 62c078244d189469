#include "runtime/expert_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "formats/gguf.h"

namespace anymoe {
namespace {

Status UploadRefusal(const std::string& message, const char* code) {
  return Status::Error("expert upload: " + message, ErrorKind::kInvalidArgument, code);
}

// The GGUF parser reads a mapped file; the upload goes through an unlinked
// temporary one (the mapping outlives its name).
Expected<std::unique_ptr<GgufFile>> OpenUploadedGguf(std::string_view bytes) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") +
                     "/anymoe-upload-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    return Status::Error("expert upload: cannot create a temporary file: " +
                             std::string(std::strerror(errno)),
                         ErrorKind::kInternal, "upload_io");
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) {
      close(fd);
      unlink(path.c_str());
      return Status::Error("expert upload: cannot write a temporary file",
                           ErrorKind::kInternal, "upload_io");
    }
    written += size_t(n);
  }
  close(fd);
  Expected<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
  unlink(path.c_str());
  if (!gguf.ok()) {
    // The parser names the temporary path; the client knows its upload.
    std::string why = gguf.status().message();
    if (why.starts_with(path)) why = "the body" + why.substr(path.size());
    return UploadRefusal("not a readable GGUF file: " + why, "invalid_upload");
  }
  return gguf;
}

// Storage aligned as a mapped GGUF's tensor data is at least (32 bytes), so
// that a backend may use it in place as it does the file's.
struct UploadBytes {
  static constexpr uint64_t kAlign = 64;
  explicit UploadBytes(uint64_t n)
      : data(static_cast<uint8_t*>(std::aligned_alloc(kAlign, std::max<uint64_t>(kAlign, n)))) {}
  ~UploadBytes() { std::free(data); }
  UploadBytes(const UploadBytes&) = delete;
  UploadBytes& operator=(const UploadBytes&) = delete;
  uint8_t* data;
};

uint64_t RoundUpToUploadAlign(uint64_t n) {
  return (n + UploadBytes::kAlign - 1) / UploadBytes::kAlign * UploadBytes::kAlign;
}

}  // namespace

Expected<StagedExperts> StageExpertUpload(std::string_view gguf_bytes, int64_t layer,
                                          std::span<const int64_t> experts,
                                          const ReplaceableExperts& shape) {
  if (experts.empty() || experts.size() > kMaxUploadExperts) {
    return UploadRefusal("name 1 to " + std::to_string(kMaxUploadExperts) + " experts", "invalid_expert");
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    if (experts[i] < 0 || experts[i] >= shape.num_experts) {
      return UploadRefusal("layer " + std::to_string(layer) + " has experts 0-" +
                        std::to_string(shape.num_experts - 1) + ", not " +
                        std::to_string(experts[i]),
                    "invalid_expert");
    }
    for (size_t j = 0; j < i; ++j) {
      if (experts[j] == experts[i]) {
        return UploadRefusal("expert " + std::to_string(experts[i]) + " is named twice", "invalid_expert");
      }
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, OpenUploadedGguf(gguf_bytes));
  const int64_t n = int64_t(experts.size());
  const std::string base = "blk." + std::to_string(layer) + ".ffn_";
  const char* kNames[kExpertParts] = {"gate_exps", "up_exps", "down_exps"};
  std::array<const TensorInfo*, kExpertParts> found{};
  for (int p = 0; p < kExpertParts; ++p) {
    const std::string name = base + kNames[p] + ".weight";
    const ExpertMatrix& m = shape.parts[size_t(p)];
    const TensorInfo* t = file->Find(name);
    if (t == nullptr) return UploadRefusal("the file has no tensor " + name, "missing_tensor");
    const std::vector<int64_t> want{n, m.rows, m.cols};
    if (t->shape != want) {
      return UploadRefusal(name + " has shape " + ShapeString(t->shape) + ", the layer's " +
                        std::to_string(n) + " named experts need " + ShapeString(want),
                    "invalid_shape");
    }
    if (t->dtype != m.dtype) {
      return UploadRefusal(name + " is " + std::string(Name(t->dtype)) + ", the model's experts are " +
                        std::string(Name(m.dtype)),
                    "invalid_dtype");
    }
    if (t->bytes != uint64_t(n) * m.bytes) {
      return UploadRefusal(name + " holds " + std::to_string(t->bytes) + " bytes, expected " +
                        std::to_string(uint64_t(n) * m.bytes),
                    "invalid_shape");
    }
    found[size_t(p)] = t;
  }
  // Anything else in the file is a mistake the client should hear about (a
  // tensor of another layer would otherwise be ignored silently).
  for (const TensorInfo& t : file->tensors()) {
    bool known = false;
    for (const TensorInfo* f : found) known |= f == &t;
    if (!known) {
      return UploadRefusal("unexpected tensor " + t.name + " (only " + base +
                        "{gate,up,down}_exps.weight of the layer named)",
                    "unexpected_tensor");
    }
  }
  // Every value must be finite: checked on the decoded values, whatever the dtype.
  std::vector<float> row;
  for (int p = 0; p < kExpertParts; ++p) {
    const TensorInfo& t = *found[size_t(p)];
    const int64_t cols = t.cols(), rows = t.rows();
    const uint64_t row_bytes = t.bytes / uint64_t(rows);
    row.resize(size_t(cols));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t.dtype, t.data + uint64_t(r) * row_bytes, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) {
        if (!std::isfinite(row[size_t(c)])) {
          const int64_t per_expert = shape.parts[size_t(p)].rows;
          return UploadRefusal(t.name + ": expert " + std::to_string(experts[size_t(r / per_expert)]) +
                            " row " + std::to_string(r % per_expert) + " column " +
                            std::to_string(c) + " is not finite (" +
                            std::to_string(row[size_t(c)]) + ")",
                        "non_finite");
        }
      }
    }
  }
  // Copied out of the upload, each expert's parts on their own aligned runs.
  uint64_t total = 0;
  for (int p = 0; p < kExpertParts; ++p) total += uint64_t(n) * RoundUpToUploadAlign(shape.parts[size_t(p)].bytes);
  auto storage = std::make_shared<UploadBytes>(total);
  if (storage->data == nullptr) {
    return Status::Error("expert upload: out of memory staging " + std::to_string(total) + " bytes",
                         ErrorKind::kInternal, "upload_io");
  }
  StagedExperts staged;
  staged.layer = layer;
  staged.experts.assign(experts.begin(), experts.end());
  staged.parts.resize(size_t(n));
  uint64_t at = 0;
  for (int64_t e = 0; e < n; ++e) {
    for (int p = 0; p < kExpertParts; ++p) {
      const ExpertMatrix& m = shape.parts[size_t(p)];
      const TensorInfo& t = *found[size_t(p)];
      std::memcpy(storage->data + at, t.data + uint64_t(e) * m.bytes, m.bytes);
      staged.parts[size_t(e)][size_t(p)] =
          TensorInfo{t.name + "[expert " + std::to_string(experts[size_t(e)]) + "]", m.dtype,
                     {m.rows, m.cols}, storage->data + at, m.bytes, BlockScales{}};
      at += RoundUpToUploadAlign(m.bytes);
    }
  }
  staged.storage = std::move(storage);
  return staged;
}

Status ApplyStagedExperts(Model& model, const StagedExperts& staged) {
  for (size_t i = 0; i < staged.experts.size(); ++i) {
    RETURN_IF_ERROR(
        model.ReplaceExpert(staged.layer, staged.experts[i], staged.parts[i], staged.storage));
  }
  return Status::Ok();
}

}  // namespace anymoe
