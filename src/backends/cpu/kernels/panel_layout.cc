#include "backends/cpu/kernels/panel_layout.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

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

// One block of 8 rows into its values vectors at `v`. `rows[j]` points at
// row j's quants of the block. Packing runs on the I/O thread after every
// streamed expert's read, so it is vectorised where the architecture's
// baseline has the shuffles: scalar it took ~0.6 ms per expert of the mini
// bench file (2.4 GB/s), as long as half the read itself.
#if defined(__SSE2__)
// x86: vector c lane j = bytes 4c..4c+3 of row j. Per 4 rows and 16 bytes
// that is a 4x4 transpose of 32-bit lanes.
void PackBlockValues(const uint8_t* const rows[kPanelRows], bool q8, size_t value_bytes,
                     uint8_t* v) {
  const __m128i flip = _mm_set1_epi8(q8 ? char(0x80) : 0);
  for (size_t quad = 0; quad < value_bytes / 128; ++quad) {  // 16 bytes of each row
    for (size_t half = 0; half < 2; ++half) {                // rows 4 half .. 4 half + 3
      __m128i r[4];
      for (size_t i = 0; i < 4; ++i) {
        r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * half + i] + 16 * quad));
      }
      const __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpacklo_epi32(r[2], r[3]);
      const __m128i t2 = _mm_unpackhi_epi32(r[0], r[1]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
      const __m128i lanes[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1),
                                _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)};
      for (size_t i = 0; i < 4; ++i) {  // vector c = 4 quad + i, lanes 4 half ..
        _mm_storeu_si128(reinterpret_cast<__m128i*>(v + 32 * (4 * quad + i) + 16 * half),
                         _mm_xor_si128(lanes[i], flip));
      }
    }
  }
}
#elif defined(__aarch64__)
// ARM: vector parts p + c = row 2p's bytes 8c..8c+7, then row 2p+1's (q4:
// each byte XOR 0x88): the 64-bit halves of the two rows, zipped.
void PackBlockValues(const uint8_t* const rows[kPanelRows], bool q8, size_t value_bytes,
                     uint8_t* v) {
  const uint8x16_t flip = vdupq_n_u8(q8 ? 0 : 0x88);
  const size_t parts = value_bytes / 64;  // vectors per pair: 4 (q8_0) or 2
  for (size_t p = 0; p < kPanelRows / 2; ++p) {
    for (size_t c = 0; c < parts; c += 2) {  // 16 bytes of each row: two vectors
      const uint64x2_t a = vreinterpretq_u64_u8(veorq_u8(vld1q_u8(rows[2 * p] + 8 * c), flip));
      const uint64x2_t b = vreinterpretq_u64_u8(veorq_u8(vld1q_u8(rows[2 * p + 1] + 8 * c), flip));
      vst1q_u8(v + 16 * (parts * p + c), vreinterpretq_u8_u64(vzip1q_u64(a, b)));
      vst1q_u8(v + 16 * (parts * p + c + 1), vreinterpretq_u8_u64(vzip2q_u64(a, b)));
    }
  }
}
#else
// Elsewhere nothing reads panels (HasPanelKernels): the x86 flavour, bytewise.
void PackBlockValues(const uint8_t* const rows[kPanelRows], bool q8, size_t value_bytes,
                     uint8_t* v) {
  const uint32_t flip = q8 ? 0x80808080u : 0u;
  for (size_t j = 0; j < size_t(kPanelRows); ++j) {
    for (size_t c = 0; c < value_bytes / 32; ++c) {
      uint32_t lane;
      std::memcpy(&lane, rows[j] + 4 * c, 4);
      lane ^= flip;
      std::memcpy(v + 32 * c + 4 * j, &lane, 4);
    }
  }
}
#endif

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
      const uint8_t* blocks[kPanelRows];
      const uint8_t* row_quants[kPanelRows];
      for (int64_t j = 0; j < kPanelRows; ++j) {
        blocks[j] = group + size_t(j) * row_bytes + size_t(b) * block_bytes;
        row_quants[j] = blocks[j] + quants;
      }
      PackBlockValues(row_quants, q8, value_bytes, values + size_t(b) * value_bytes);
      for (int64_t j = 0; j < kPanelRows; ++j) {
        std::memcpy(scales + (size_t(b) * kPanelRows + size_t(j)) * 2, blocks[j], 2);
        if (has_min) std::memcpy(mins + (size_t(b) * kPanelRows + size_t(j)) * 2, blocks[j] + 2, 2);
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
