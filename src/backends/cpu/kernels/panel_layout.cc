#include "backends/cpu/kernels/panel_layout.h"

#include <cstring>

#include "core/check.h"

namespace anymoe::kernels {

bool HasPanelLayout(DType weight_type) {
  return weight_type == DType::kQ8_0 || weight_type == DType::kQ4_0 || weight_type == DType::kQ4_1;
}

size_t PanelValueBytes(DType weight_type) {
  CHECK(HasPanelLayout(weight_type));
  return weight_type == DType::kQ8_0 ? 256 : 128;
}

namespace {

// The sizes both directions of the layout need, for rows of k values.
struct Geometry {
  size_t block_bytes, value_bytes;
  bool q8, has_min;
  size_t quants;  // where a block's quants start in the file: after d (and m for q4_1)
  int64_t nb;     // blocks per row
  size_t row_bytes;
};

Geometry GeometryOf(DType weight_type, int64_t k) {
  CHECK(HasPanelLayout(weight_type) && k % 32 == 0);
  Geometry g;
  g.block_bytes = size_t(Info(weight_type).block_bytes);
  g.value_bytes = PanelValueBytes(weight_type);
  g.q8 = weight_type == DType::kQ8_0;
  g.has_min = weight_type == DType::kQ4_1;
  g.quants = g.has_min ? 4 : 2;
  g.nb = k / 32;
  g.row_bytes = size_t(g.nb) * g.block_bytes;
  return g;
}

}  // namespace

void PackPanels(DType weight_type, const uint8_t* w, int64_t rows, int64_t k, uint8_t* out) {
  CHECK(rows % kPanelRows == 0);
  const auto [block_bytes, value_bytes, q8, has_min, quants, nb, row_bytes] =
      GeometryOf(weight_type, k);
  for (int64_t g = 0; g < rows / kPanelRows; ++g) {
    const uint8_t* group = w + size_t(g) * kPanelRows * row_bytes;
    uint8_t* values = out + size_t(g) * kPanelRows * row_bytes;
    uint8_t* scales = values + size_t(nb) * value_bytes;
    uint8_t* mins = scales + size_t(nb) * kPanelRows * 2;
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t j = 0; j < kPanelRows; ++j) {
        const uint8_t* blk = group + size_t(j) * row_bytes + size_t(b) * block_bytes;
        uint8_t* v = values + size_t(b) * value_bytes;
#if defined(__aarch64__)
        // Pair p = j / 2: vector c of the pair holds 8 bytes of row 2p, then 8
        // of row 2p + 1 (nibbles XOR 0x88).
        const uint64_t flip = q8 ? 0 : 0x8888888888888888u;
        const size_t parts = value_bytes / 64;  // vectors per pair: 4 (q8_0) or 2
        for (size_t c = 0; c < parts; ++c) {
          uint64_t half;
          std::memcpy(&half, blk + quants + 8 * c, 8);
          half ^= flip;
          std::memcpy(v + 16 * (parts * size_t(j / 2) + c) + 8 * size_t(j % 2), &half, 8);
        }
#else
        // Lane j of vector c is the 4 bytes at 32 c + 4 j (q8_0: each + 128).
        const uint32_t flip = q8 ? 0x80808080u : 0u;
        for (size_t c = 0; c < value_bytes / 32; ++c) {
          uint32_t lane;
          std::memcpy(&lane, blk + quants + 4 * c, 4);
          lane ^= flip;
          std::memcpy(v + 32 * c + 4 * size_t(j), &lane, 4);
        }
#endif
        std::memcpy(scales + (size_t(b) * kPanelRows + size_t(j)) * 2, blk, 2);
        if (has_min) std::memcpy(mins + (size_t(b) * kPanelRows + size_t(j)) * 2, blk + 2, 2);
      }
    }
  }
}

void UnpackPanelRow(DType weight_type, const uint8_t* panels, int64_t row, int64_t k,
                    uint8_t* out) {
  const auto [block_bytes, value_bytes, q8, has_min, quants, nb, row_bytes] =
      GeometryOf(weight_type, k);
  const int64_t g = row / kPanelRows, j = row % kPanelRows;
  const uint8_t* values = panels + size_t(g) * kPanelRows * row_bytes;
  const uint8_t* scales = values + size_t(nb) * value_bytes;
  const uint8_t* mins = scales + size_t(nb) * kPanelRows * 2;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = out + size_t(b) * block_bytes;
    const uint8_t* v = values + size_t(b) * value_bytes;
#if defined(__aarch64__)
    // The inverse of PackPanels' pairs of rows, 8 bytes at a time.
    const uint64_t flip = q8 ? 0 : 0x8888888888888888u;
    const size_t parts = value_bytes / 64;
    for (size_t c = 0; c < parts; ++c) {
      uint64_t half;
      std::memcpy(&half, v + 16 * (parts * size_t(j / 2) + c) + 8 * size_t(j % 2), 8);
      half ^= flip;
      std::memcpy(blk + quants + 8 * c, &half, 8);
    }
#else
    const uint32_t flip = q8 ? 0x80808080u : 0u;
    for (size_t c = 0; c < value_bytes / 32; ++c) {
      uint32_t lane;
      std::memcpy(&lane, v + 32 * c + 4 * size_t(j), 4);
      lane ^= flip;
      std::memcpy(blk + quants + 4 * c, &lane, 4);
    }
#endif
    std::memcpy(blk, scales + (size_t(b) * kPanelRows + size_t(j)) * 2, 2);
    if (has_min) std::memcpy(blk + 2, mins + (size_t(b) * kPanelRows + size_t(j)) * 2, 2);
  }
}

}  // namespace anymoe::kernels
