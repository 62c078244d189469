// The CPU's 8-row panel layout of q8_0 / q4_0 / q4_1 weights, written once at
// load so that the integer kernels (x86: AVX-512 VNNI, AVX2 with or without
// AVX-VNNI; ARM: sdot / smmla) read weights in the order they multiply them.
//
// In the file a block of 32 values is stored row after row. The integer kernels
// multiply 8 weight rows at once, one int32 lane per row (see
// quant_matmul_packed-inl.h): packing those 8 rows into lanes on every call
// costs about a quarter of a batched decode step, and a single-row kernel on the
// file layout pays a horizontal sum per block instead. Stored as panels, both go
// away, and one kernel serves every row count, so a row's result cannot depend
// on its batch.
//
// Rows are grouped by 8 (row 8g + j is lane j of group g); a group of k values
// (nb = k / 32 blocks) is, in this order:
//   values[nb]  per block, the 32 values of the 8 rows as int32 lanes:
//               q8_0: 8 vectors of 32 bytes, vector c lane j = bytes 4c..4c+3
//                     of row j's values as unsigned (q + 128);
//               q4_0 / q4_1: 4 vectors, vector c lane j = the file's nibble
//                     bytes 4c..4c+3 of row j (values 4c.. low, 4c+16.. high);
//   scales[nb]  8 f16 scales d, row j at j;
//   mins[nb]    q4_1 only: 8 f16 mins m.
// On 64-bit ARM (the sdot / smmla kernels of quant_matmul_arm-inl.h) the values
// are laid out for those instead, rows in pairs (rows 2p, 2p+1), 8 bytes each:
//   q8_0: 16 vectors of 16 bytes, vector 4p + c = row 2p's values 8c..8c+7,
//         then row 2p+1's (signed, as in the file);
//   q4_0 / q4_1: 8 vectors, vector 2p + c = row 2p's nibble bytes 8c..8c+7,
//         then row 2p+1's, each byte XOR 0x88: a nibble q becomes q - 8 in
//         the top 4 bits of a byte (<< 4 for the low nibble, & 0xf0 for the
//         high one), 16 (q - 8) as a signed byte.
// A group takes exactly the bytes of its 8 rows in the file, so a tensor keeps
// its size and a slice starting at a row multiple of 8 (an expert's matrix)
// starts at the same byte offset in both layouts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace anymoe::kernels {

inline constexpr int64_t kPanelRows = 8;

// q8_0, q4_0 and q4_1: the types the panel layout is defined for.
bool HasPanelLayout(DType weight_type);

// Bytes of one block's values in a group (256 for q8_0, 128 for q4_0 / q4_1).
size_t PanelValueBytes(DType weight_type);

// Rewrites `rows` rows of k values (file layout, rows contiguous) into `out`
// (the same number of bytes) in the panel layout. rows % 8 == 0, k % 32 == 0.
void PackPanels(DType weight_type, const uint8_t* w, int64_t rows, int64_t k, uint8_t* out);

// The inverse for one row: row `row` of panels of k values (PackPanels'
// output) back into the file layout, row_bytes bytes at `out`.
void UnpackPanelRow(DType weight_type, const uint8_t* panels, int64_t row, int64_t k,
                    uint8_t* out);

}  // namespace anymoe::kernels
