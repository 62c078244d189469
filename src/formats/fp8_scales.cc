// Pairs FP8 weights with their `_scale_inv` block scales and validates them.
#include "formats/fp8_scales.h"

#include "formats/hf_config.h"
#include "formats/parse_util.h"

namespace anymoe {
namespace {

constexpr int64_t kMaxBlock = 1 << 16;

bool IsFp8(DType t) { return t == DType::kF8_E4M3 || t == DType::kF8_E5M2; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status TensorError(const std::string& where, const std::string& name, const std::string& what) {
  return Status::Error(where + ": tensor " + QuoteName(name) + ": " + what);
}

}  // namespace

Expected<Fp8Quantization> ReadFp8Quantization(const HfConfig& config) {
  Fp8Quantization q;
  const nlohmann::json* qc = config.Find("quantization_config");
  if (qc == nullptr || qc->is_null()) return q;
  const std::string where = config.path() + ": quantization_config";
  if (!qc->is_object()) return Status::Error(where + " is not an object");
  q.declared = true;
  const std::string method = config.GetString("quantization_config.quant_method").value_or("");
  if (method != "fp8") {
    return Status::Error(where + ".quant_method " + QuoteName(method) +
                         " is not supported (anymoe reads fp8 block-quantised checkpoints)");
  }
  if (const nlohmann::json* block = config.Find("quantization_config.weight_block_size")) {
    if (!block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
        !(*block)[1].is_number_integer()) {
      return Status::Error(where + ".weight_block_size must be two integers");
    }
    q.block_rows = (*block)[0].get<int64_t>();
    q.block_cols = (*block)[1].get<int64_t>();
    if (q.block_rows < 1 || q.block_cols < 1 || q.block_rows > kMaxBlock ||
        q.block_cols > kMaxBlock) {
      return Status::Error(where + ".weight_block_size " + block->dump() + " is out of range [1, " +
                           std::to_string(kMaxBlock) + "]");
    }
  } else {
    return Status::Error(where + " has no weight_block_size (per-tensor FP8 scales are not "
                                 "supported)");
  }
  if (const nlohmann::json* list = config.Find("quantization_config.modules_to_not_convert")) {
    if (!list->is_null()) {
      if (!list->is_array()) return Status::Error(where + ".modules_to_not_convert is not a list");
      for (const nlohmann::json& m : *list) {
        if (!m.is_string()) {
          return Status::Error(where + ".modules_to_not_convert holds a non-string");
        }
        q.modules_to_not_convert.push_back(m.get<std::string>());
      }
    }
  }
  return q;
}

Status AttachFp8Scales(const std::string& where, std::span<TensorInfo> tensors,
                       const TensorInfo* (*find)(const void* ctx, const std::string& name),
                       const void* ctx, const Fp8Quantization& q) {
  for (TensorInfo& t : tensors) {
    if (!IsFp8(t.dtype)) continue;
    const std::string module =
        t.name.ends_with(".weight") ? t.name.substr(0, t.name.size() - 7) : t.name;
    for (const std::string& m : q.modules_to_not_convert) {
      if (!m.empty() && module.find(m) != std::string::npos) {
        return TensorError(where, t.name,
                           "stored as " + std::string(Name(t.dtype)) + " but module " +
                               QuoteName(m) + " is in quantization_config.modules_to_not_convert");
      }
    }
    if (t.shape.size() != 2) {
      return TensorError(where, t.name,
                         std::string(Name(t.dtype)) + " tensor of shape " + ShapeString(t.shape) +
                             " is not a matrix (block scales need [rows, cols])");
    }
    const std::string scale_name = t.name + "_scale_inv";
    const TensorInfo* s = find(ctx, scale_name);
    if (s == nullptr) {
      return TensorError(where, t.name,
                         std::string(Name(t.dtype)) + " weight has no scale tensor " +
                             QuoteName(scale_name));
    }
    const std::vector<int64_t> want = {CeilDiv(t.shape[0], q.block_rows),
                                       CeilDiv(t.shape[1], q.block_cols)};
    if (s->dtype != DType::kF32 || s->shape != want) {
      return TensorError(where, t.name,
                         "scale tensor " + QuoteName(scale_name) + " is " +
                             std::string(Name(s->dtype)) + " " + ShapeString(s->shape) +
                             ", expected f32 " + ShapeString(want) + " (blocks of " +
                             std::to_string(q.block_rows) + "x" + std::to_string(q.block_cols) +
                             " over " + ShapeString(t.shape) + ")");
    }
    t.scales = BlockScales{s->data, int32_t(q.block_rows), int32_t(q.block_cols)};
  }
  return Status::Ok();
}

}  // namespace anymoe
