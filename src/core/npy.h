// Reading and writing NumPy .npy files (format versions 1-3, little-endian,
// C order) for golden tests and the CLI's --logits-out. Read files are treated as
// untrusted: the header is parsed strictly and sizes are checked before copying.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe {

enum class NpyDType : uint8_t { kF32, kF16, kI32, kU8 };

std::string_view NpyDTypeName(NpyDType t);  // "f32", "f16", "i32", "u8"
int NpyDTypeSize(NpyDType t);               // bytes per element

struct NpyArray {
  NpyDType dtype = NpyDType::kF32;
  std::vector<int64_t> shape;  // outer-first; empty for a 0-d array
  std::vector<uint8_t> bytes;  // elements() * NpyDTypeSize(dtype) little-endian bytes

  int64_t elements() const;  // product of shape (1 for a 0-d array)
  // Element copies; each returns an error unless `dtype` matches (no conversion).
  Expected<std::vector<float>> F32() const;
  Expected<std::vector<uint16_t>> F16Bits() const;
  Expected<std::vector<int32_t>> I32() const;
  Expected<std::vector<uint8_t>> U8() const;
};

// Parses a whole .npy file image; `name` is used in error messages.
Expected<NpyArray> ParseNpy(std::span<const uint8_t> file, const std::string& name);
Expected<NpyArray> ReadNpy(const std::string& path);

// Writes `data` (product(shape) elements of `dtype`, C order, host = little-endian)
// as a version 1.0 .npy file. Errors name the path.
Status WriteNpy(const std::string& path, NpyDType dtype, std::span<const int64_t> shape,
                const void* data);
inline Status WriteNpyF32(const std::string& path, std::span<const int64_t> shape,
                          std::span<const float> data) {
  return WriteNpy(path, NpyDType::kF32, shape, data.data());
}

}  // namespace anymoe
