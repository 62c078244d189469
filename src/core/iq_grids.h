// The codebooks ("grids") of the GGUF i-quants IQ1_S/IQ1_M, IQ2_XXS/XS/S and
// IQ3_XXS/S: each stored group of 8 (or 4) weights is an index into one of
// these. They are data of the format, regenerated from the gguf package by
// tools/gen_iq_grids.py (iq_grids.cc). Row r packs value j in byte j.
#pragma once

#include <cstdint>

namespace anymoe {

extern const uint64_t kIq1sGrid[2048];   // int8 values in {-1, 0, 1}; IQ1_S and IQ1_M
extern const uint64_t kIq2xxsGrid[256];  // uint8 values in {8, 25, 43}
extern const uint64_t kIq2xsGrid[512];   // uint8 values in {8, 25, 43}
extern const uint64_t kIq2sGrid[1024];   // uint8 values in {8, 25, 43}
extern const uint32_t kIq3xxsGrid[256];  // uint8 values in {4, 12, ..., 62}
extern const uint32_t kIq3sGrid[512];    // uint8 values in {1, 3, ..., 15}

}  // namespace anymoe
