// Weight and activation element types, with the block layout of each quantised
// format. Quantised formats are stored exactly as GGUF defines them, so a GGUF
// tensor is used in place from the mmap with no conversion.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace anymoe {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,  // blocks of 32: f16 scale + 32 x int8
  kQ4_0,  // blocks of 32: f16 scale + 16 bytes of 4-bit values, offset 8
  kQ4_1,  // blocks of 32: f16 scale + f16 min + 16 bytes of 4-bit values
  kQ4_K,  // super-blocks of 256: 8 sub-blocks with 6-bit scales/mins
  kQ5_K,  // super-blocks of 256: like q4_k plus one high bit per value
  kQ6_K,  // super-blocks of 256: 16 sub-blocks with int8 scales
  kI32,   // metadata-like tensors only (never a matmul operand)
};

struct DTypeInfo {
  std::string_view name;  // "f32", "q4_k", ... as llama.cpp spells it
  int block_elems;        // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
  bool quantized;
};

const DTypeInfo& Info(DType t);
inline std::string_view Name(DType t) { return Info(t).name; }

// GGML type id (the value stored in a GGUF tensor info) to DType; nullopt if unsupported.
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
uint32_t GgmlTypeOf(DType t);

// Bytes used by `n` consecutive elements; an error if `n` is not a whole number
// of blocks or the byte count overflows.
Expected<uint64_t> BytesFor(DType t, uint64_t n);

// Converts `n` elements (a whole number of blocks) starting at `src` to f32.
// Bit-exact with the `gguf` Python package's numpy dequantisers.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace anymoe
