// The CUDA kernels' weight decoders (backends/cuda/kernels/weight_decode.cuh),
// compiled here by the host compiler, against the CPU dequantisers
// (DequantizeRow, bit-exact with the `gguf` package: tests/core/dequant_test.cc)
// on every weight type: the same bits for every element of rows of random
// blocks, whose random f16 / e8m0 scales reach zero, subnormals, the largest
// values, infinities and NaNs (any NaN matches any NaN). This holds on any
// machine, with or without a GPU or the CUDA toolkit; what it cannot show is
// nvcc's code for the device, which the conformance suite checks on a GPU
// (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/kernels/weight_decode.cuh"
#include "core/dtype.h"

namespace anymoe {
namespace {

namespace k = cuda::kernels;

struct DecodeCase {
  DType dtype;
  k::WeightType weight_type;
};
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << Name(c.dtype); }

// Every DType the kernels decode (all but kI32, which no weight has).
constexpr DecodeCase kCases[] = {
    {DType::kF32, k::kF32},         {DType::kF16, k::kF16},       {DType::kBF16, k::kBF16},
    {DType::kQ8_0, k::kQ8_0},       {DType::kQ4_0, k::kQ4_0},     {DType::kQ4_1, k::kQ4_1},
    {DType::kQ4_K, k::kQ4_K},       {DType::kQ5_K, k::kQ5_K},     {DType::kQ6_K, k::kQ6_K},
    {DType::kQ2_K, k::kQ2_K},       {DType::kQ3_K, k::kQ3_K},     {DType::kQ5_0, k::kQ5_0},
    {DType::kQ5_1, k::kQ5_1},       {DType::kIQ1_S, k::kIQ1_S},   {DType::kIQ1_M, k::kIQ1_M},
    {DType::kIQ2_XXS, k::kIQ2_XXS}, {DType::kIQ2_XS, k::kIQ2_XS}, {DType::kIQ2_S, k::kIQ2_S},
    {DType::kIQ3_XXS, k::kIQ3_XXS}, {DType::kIQ3_S, k::kIQ3_S},   {DType::kIQ4_XS, k::kIQ4_XS},
    {DType::kIQ4_NL, k::kIQ4_NL},   {DType::kMXFP4, k::kMXFP4},   {DType::kF8_E4M3, k::kF8_E4M3},
    {DType::kF8_E5M2, k::kF8_E5M2},
};
static_assert(std::size(kCases) == kNumDTypes - 1, "a DType without a CUDA decode case");

TEST(CudaWeightTypes, AreTheDTypeValues) {
  for (const DecodeCase& c : kCases) {
    EXPECT_EQ(int(c.dtype), int(c.weight_type)) << Name(c.dtype);
  }
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

class CudaWeightDecodeTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(CudaWeightDecodeTest, EveryElementMatchesTheCpuDequantiser) {
  const DecodeCase c = GetParam();
  const DTypeInfo& info = Info(c.dtype);
  // Blocks: 2048 of random bytes, where each f16 block scale has a 1 in 32
  // chance of a zero / subnormal exponent and of an infinite / NaN one, and
  // (nearly surely) every e8m0 exponent occurs. One-element types: every value
  // of FP8, f16 and bf16 in turn; random f32 bits.
  const int64_t blocks = info.block_elems > 1 ? 2048 : 65536, n = blocks * info.block_elems;
  std::vector<uint8_t> row(blocks * info.block_bytes);
  std::mt19937 rng(1234 + int(c.dtype));
  for (uint8_t& b : row) b = uint8_t(rng());
  if (info.block_elems == 1 && info.block_bytes <= 2) {
    for (int64_t i = 0; i < blocks; ++i) {
      const uint16_t v = uint16_t(i);
      std::memcpy(row.data() + i * info.block_bytes, &v, size_t(info.block_bytes));
    }
  }
  std::vector<float> want(n);
  DequantizeRow(c.dtype, row.data(), want.data(), n);

  int mismatches = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float got = k::WeightAt(reinterpret_cast<const char*>(row.data()), c.weight_type, int(j));
    if (std::isnan(got) && std::isnan(want[j])) continue;
    if (Bits(got) != Bits(want[j]) && ++mismatches <= 5) {
      ADD_FAILURE() << Name(c.dtype) << " element " << j << " (block " << j / info.block_elems
                    << "): device decoder " << got << " (0x" << std::hex << Bits(got) << "), CPU "
                    << want[j] << " (0x" << Bits(want[j]) << std::dec << ")";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << n << " elements";
}

INSTANTIATE_TEST_SUITE_P(EveryType, CudaWeightDecodeTest, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(Name(p.param.dtype)); });

}  // namespace
}  // namespace anymoe
