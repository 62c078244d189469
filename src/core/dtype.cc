// Element types: the per-type block table, GGML type ids, checked byte counts and
// scalar reference dequantisers. The dequantisers follow the block layouts of
// ggml (as documented by gguf-py's numpy code) and round exactly as that code does
// (one f32 rounding per numpy operation, no fused multiply-add), so they serve as
// the bit-exact reference that SIMD kernels are tested against.
#include "core/dtype.h"

#include <cstring>
#include <string>

#include "core/check.h"
#include "core/half.h"

// numpy never fuses a*b+c; neither may we, or results differ in the last bit.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace anymoe {
namespace {

constexpr int kQK = 32;    // elements per block of q8_0 / q4_0 / q4_1
constexpr int kQKK = 256;  // elements per super-block of the k-quants

// Index = static_cast<int>(DType).
constexpr DTypeInfo kInfos[] = {
    {"f32", 1, 4, false},
    {"f16", 1, 2, false},
    {"bf16", 1, 2, false},
    {"q8_0", kQK, 2 + kQK, true},
    {"q4_0", kQK, 2 + kQK / 2, true},
    {"q4_1", kQK, 2 + 2 + kQK / 2, true},
    {"q4_k", kQKK, 2 + 2 + 12 + kQKK / 2, true},
    {"q5_k", kQKK, 2 + 2 + 12 + kQKK / 8 + kQKK / 2, true},
    {"q6_k", kQKK, kQKK / 2 + kQKK / 4 + kQKK / 16 + 2, true},
    {"i32", 1, 4, false},
};
constexpr int kNumDTypes = sizeof(kInfos) / sizeof(kInfos[0]);

struct GgmlId {
  DType dtype;
  uint32_t ggml_type;
};
constexpr GgmlId kGgmlIds[] = {
    {DType::kF32, 0},  {DType::kF16, 1},   {DType::kQ4_0, 2},  {DType::kQ4_1, 3},
    {DType::kQ8_0, 8}, {DType::kQ4_K, 12}, {DType::kQ5_K, 13}, {DType::kQ6_K, 14},
    {DType::kI32, 26}, {DType::kBF16, 30},
};

// Unaligned little-endian loads: mmap'd blocks carry no alignment promise.
inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

void DequantizeQ8_0(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
  for (int i = 0; i < kQK; ++i) out[i] = float(qs[i]) * d;
}

// Low nibbles hold elements 0..15, high nibbles 16..31.
void DequantizeQ4_0(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const uint8_t* qs = block + 2;
  for (int i = 0; i < kQK / 2; ++i) {
    out[i] = d * float(int(qs[i] & 0x0f) - 8);
    out[i + kQK / 2] = d * float(int(qs[i] >> 4) - 8);
  }
}

void DequantizeQ4_1(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float m = LoadF16(block + 2);
  const uint8_t* qs = block + 4;
  for (int i = 0; i < kQK / 2; ++i) {
    out[i] = d * float(qs[i] & 0x0f) + m;
    out[i + kQK / 2] = d * float(qs[i] >> 4) + m;
  }
}

// The 12 scale bytes of q4_k / q5_k pack eight 6-bit scales and eight 6-bit mins:
// bytes 0..3 / 4..7 hold the low 6 bits of scales / mins 0..3 (their top 2 bits are
// the high bits of scales / mins 4..7), bytes 8..11 hold the low 4 bits of
// scales 4..7 (low nibble) and mins 4..7 (high nibble).
void UnpackKScales(const uint8_t* s, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = s[j] & 0x3f;
    min[j] = s[j + 4] & 0x3f;
    scale[j + 4] = uint8_t((s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30));
    min[j + 4] = uint8_t((s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30));
  }
}

// Super-block: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Sub-block j
// (32 values) uses byte group j/2, low nibbles for even j and high for odd j.
void DequantizeQ4_K(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float dmin = LoadF16(block + 2);
  uint8_t scale[8], min[8];
  UnpackKScales(block + 4, scale, min);
  const uint8_t* qs = block + 16;
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(scale[j]);
    const float ml = dmin * float(min[j]);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) out[32 * j + l] = dl * float((q[l] >> shift) & 0x0f) - ml;
  }
}

// Like q4_k, with 32 bytes of high bits after the scales: bit j of qh[l] is the
// fifth bit of value l of sub-block j.
void DequantizeQ5_K(const uint8_t* block, float* out) {
  const float d = LoadF16(block);
  const float dmin = LoadF16(block + 2);
  uint8_t scale[8], min[8];
  UnpackKScales(block + 4, scale, min);
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(scale[j]);
    const float ml = dmin * float(min[j]);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> j) & 1) << 4);
      out[32 * j + l] = dl * float(v) - ml;
    }
  }
}

// Super-block: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales
// (one per 16 values), f16 d. Each half (128 values) uses 64 low bytes and 32 high
// bytes: value 64*h + k of the half takes nibble h of ql[k], and value 32*s + k
// takes bits 2s..2s+1 of qh[k].
void DequantizeQ6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = LoadF16(block + 208);
  for (int e = 0; e < kQKK; ++e) {
    const int half = e / 128, in_half = e % 128;
    const int lo = (ql[64 * half + in_half % 64] >> (4 * (in_half / 64))) & 0x0f;
    const int hi = (qh[32 * half + in_half % 32] >> (2 * (in_half / 32))) & 0x03;
    const float dl = d * float(scales[e / 16]);
    out[e] = dl * float((lo | (hi << 4)) - 32);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

void DequantizeBlocks(BlockFn fn, DType t, const uint8_t* src, float* dst, int64_t n) {
  const DTypeInfo& info = Info(t);
  CHECK(n % info.block_elems == 0);
  for (int64_t b = 0; b < n / info.block_elems; ++b) {
    fn(src + b * info.block_bytes, dst + b * info.block_elems);
  }
}

}  // namespace

const DTypeInfo& Info(DType t) {
  const int i = static_cast<int>(t);
  CHECK(i >= 0 && i < kNumDTypes);
  return kInfos[i];
}

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (const GgmlId& id : kGgmlIds) {
    if (id.ggml_type == ggml_type) return id.dtype;
  }
  return std::nullopt;
}

uint32_t GgmlTypeOf(DType t) {
  for (const GgmlId& id : kGgmlIds) {
    if (id.dtype == t) return id.ggml_type;
  }
  CHECK(false && "DType without a GGML type id");
  return 0;
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
    case DType::kQ8_0:
      return DequantizeBlocks(DequantizeQ8_0, t, src, dst, n);
    case DType::kQ4_0:
      return DequantizeBlocks(DequantizeQ4_0, t, src, dst, n);
    case DType::kQ4_1:
      return DequantizeBlocks(DequantizeQ4_1, t, src, dst, n);
    case DType::kQ4_K:
      return DequantizeBlocks(DequantizeQ4_K, t, src, dst, n);
    case DType::kQ5_K:
      return DequantizeBlocks(DequantizeQ5_K, t, src, dst, n);
    case DType::kQ6_K:
      return DequantizeBlocks(DequantizeQ6_K, t, src, dst, n);
  }
  CHECK(false && "unknown DType");
}

}  // namespace anymoe
