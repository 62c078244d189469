// Element types: one table row per type (block layout, GGML type id, scalar
// dequantiser), checked byte counts, and DequantizeRow. The block dequantisers
// live in quant_blocks.cc / iquant_blocks.cc; a new type is a new table row.
#include "core/dtype.h"

#include <bit>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/dequant_blocks.h"
#include "core/half.h"

namespace anymoe {
namespace {

constexpr int kQK = 32;    // elements per block of the legacy formats, iq4_nl and mxfp4
constexpr int kQKK = 256;  // elements per super-block of the k- and i-quants
constexpr uint32_t kNoGgmlId = ~0u;

struct TypeRow {
  DTypeInfo info;
  uint32_t ggml_type;          // kNoGgmlId for types GGUF lacks
  dequant::BlockFn dequantize;  // quantised types only
};

// Index = static_cast<int>(DType).
constexpr TypeRow kTypes[] = {
    {{"f32", 1, 4, false}, 0, nullptr},
    {{"f16", 1, 2, false}, 1, nullptr},
    {{"bf16", 1, 2, false}, 30, nullptr},
    {{"q8_0", kQK, 2 + kQK, true}, 8, dequant::Q8_0},
    {{"q4_0", kQK, 2 + kQK / 2, true}, 2, dequant::Q4_0},
    {{"q4_1", kQK, 2 + 2 + kQK / 2, true}, 3, dequant::Q4_1},
    {{"q4_k", kQKK, 2 + 2 + 12 + kQKK / 2, true}, 12, dequant::Q4_K},
    {{"q5_k", kQKK, 2 + 2 + 12 + kQKK / 8 + kQKK / 2, true}, 13, dequant::Q5_K},
    {{"q6_k", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2, true}, 14, dequant::Q6_K},
    {{"i32", 1, 4, false}, 26, nullptr},
    {{"q2_k", kQKK, kQKK / 16 + kQKK / 4 + 2 + 2, true}, 10, dequant::Q2_K},
    {{"q3_k", kQKK, kQKK / 8 + kQKK / 4 + 12 + 2, true}, 11, dequant::Q3_K},
    {{"q5_0", kQK, 2 + 4 + kQK / 2, true}, 6, dequant::Q5_0},
    {{"q5_1", kQK, 2 + 2 + 4 + kQK / 2, true}, 7, dequant::Q5_1},
    {{"iq1_s", kQKK, 2 + kQKK / 8 + kQKK / 16, true}, 19, dequant::IQ1_S},
    {{"iq1_m", kQKK, kQKK / 8 + kQKK / 16 + kQKK / 32, true}, 29, dequant::IQ1_M},
    {{"iq2_xxs", kQKK, 2 + kQKK / 4, true}, 16, dequant::IQ2_XXS},
    {{"iq2_xs", kQKK, 2 + kQKK / 4 + kQKK / 32, true}, 17, dequant::IQ2_XS},
    {{"iq2_s", kQKK, 2 + kQKK / 4 + kQKK / 16, true}, 22, dequant::IQ2_S},
    {{"iq3_xxs", kQKK, 2 + 3 * kQKK / 8, true}, 18, dequant::IQ3_XXS},
    {{"iq3_s", kQKK, 2 + kQKK / 4 + kQKK / 32 + kQKK / 8 + kQKK / 64, true}, 21, dequant::IQ3_S},
    {{"iq4_xs", kQKK, 2 + 2 + kQKK / 64 + kQKK / 2, true}, 23, dequant::IQ4_XS},
    {{"iq4_nl", kQK, 2 + kQK / 2, true}, 20, dequant::IQ4_NL},
    {{"mxfp4", kQK, 1 + kQK / 2, true}, 39, dequant::MXFP4},
    {{"f8_e4m3", 1, 1, false}, kNoGgmlId, nullptr},
    {{"f8_e5m2", 1, 1, false}, kNoGgmlId, nullptr},
};
static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == kNumDTypes, "one row per DType");

const TypeRow& Row(DType t) {
  const int i = static_cast<int>(t);
  CHECK(i >= 0 && i < kNumDTypes);
  return kTypes[i];
}

using dequant::LoadF16;

}  // namespace

float F8E4M3ToF32(uint8_t v) {
  const uint32_t sign = uint32_t(v >> 7) << 31, exp = (v >> 3) & 0x0f, mant = v & 7;
  if (exp == 0x0f && mant == 7) return std::bit_cast<float>(sign | 0x7fc00000u);  // the NaN
  float magnitude;
  if (exp == 0) {
    magnitude = float(mant) * 0x1p-9f;  // subnormal: mant / 8 * 2^-6, exact
  } else {
    magnitude = std::bit_cast<float>((exp - 7 + 127) << 23 | mant << 20);
  }
  return sign ? -magnitude : magnitude;
}

// E5M2 is an f16 with the low 8 mantissa bits dropped.
float F8E5M2ToF32(uint8_t v) { return F16ToF32(uint16_t(v) << 8); }

const DTypeInfo& Info(DType t) { return Row(t).info; }

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kTypes[i].ggml_type == ggml_type) return DType(i);
  }
  return std::nullopt;
}

uint32_t GgmlTypeOf(DType t) {
  const uint32_t id = Row(t).ggml_type;
  CHECK(id != kNoGgmlId && "DType without a GGML type id");
  return id;
}

Expected<uint64_t> BytesFor(DType t, uint64_t n) {
  const DTypeInfo& info = Info(t);
  if (n % uint64_t(info.block_elems) != 0) {
    return Status::Error(std::to_string(n) + " elements of " + std::string(info.name) +
                         " are not a whole number of blocks of " +
                         std::to_string(info.block_elems));
  }
  const uint64_t blocks = n / uint64_t(info.block_elems);
  uint64_t bytes;
  if (__builtin_mul_overflow(blocks, uint64_t(info.block_bytes), &bytes)) {
    return Status::Error(std::to_string(n) + " elements of " + std::string(info.name) +
                         " overflow a 64-bit byte count");
  }
  return bytes;
}

void DequantizeRow(DType t, const void* src_v, float* dst, int64_t n) {
  CHECK(n >= 0);
  const uint8_t* src = static_cast<const uint8_t*>(src_v);
  const TypeRow& row = Row(t);
  if (row.dequantize != nullptr) {
    const DTypeInfo& info = row.info;
    CHECK(n % info.block_elems == 0);
    for (int64_t b = 0; b < n / info.block_elems; ++b) {
      row.dequantize(src + b * info.block_bytes, dst + b * info.block_elems);
    }
    return;
  }
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadF16(src + 2 * i);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = BF16ToF32(b);
      }
      return;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        dst[i] = float(v);
      }
      return;
    case DType::kF8_E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E4M3ToF32(src[i]);
      return;
    case DType::kF8_E5M2:
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E5M2ToF32(src[i]);
      return;
    default:
      break;
  }
  CHECK(false && "DType without a dequantiser");
}

}  // namespace anymoe
