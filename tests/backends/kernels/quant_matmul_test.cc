// The quantised matmul kernels on every Highway target compiled in (AVX3_DL with
// VNNI included), against two double-precision references: W . (x as quantised),
// which the integer kernels compute up to f32 rounding, and W . x, which they match
// only up to the 8-bit activation quantisation.
#define HWY_WANT_AVX3_DL  // so ForEachTarget also runs the VNNI kernels

#include "backends/cpu/kernels/quant_matmul.h"

#include <gtest/gtest.h>

#include "backends/cpu/kernels/panel_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/kernels/for_each_target.h"
#include "backends/kernels/random_weights.h"
#include "hwy/targets.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

// x as the kernels see it: dequantised from the activation buffer.
#if HWY_ARCH_X86
// Whether this CPU has a target with vpdpbusd (AVX-VNNI or AVX-512 VNNI):
// without one (an AVX2-only CPU, e.g. Zen 2 / Zen 3) "avx2" is the only x86
// target with integer kernels, and there is no second dot form to compare.
bool HasVnniTarget() {
  for (const CpuTarget& t : AvailableCpuTargets()) {
    if (t.name.ends_with("-vnni")) return true;
  }
  return false;
}
#endif

std::vector<float> DequantisedActivations(DType type, const void* buffer, int64_t t, int64_t k) {
  const QuantizedActivations qa = ActivationView(type, buffer, t, k);
  std::vector<float> x(size_t(t * k));
  for (int64_t i = 0; i < t * k; ++i) {
    x[size_t(i)] = qa.f32 ? qa.f32[i] : qa.d[i / kActivationBlock] * float(qa.qs[i]);
  }
  return x;
}

using Shape = std::tuple<DType, int64_t /*t*/, int64_t /*k*/>;

std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  return std::string(Name(std::get<0>(info.param))) + "_t" + std::to_string(std::get<1>(info.param)) +
         "_k" + std::to_string(std::get<2>(info.param));
}

class QuantMatmul : public ::testing::TestWithParam<Shape> {};

TEST_P(QuantMatmul, MatchesReferencesOnEveryTarget) {
  const auto [type, t, k] = GetParam();
  const int64_t n = 13;           // weight rows: no multiple of any tile or chunk
  const int64_t n0 = 2, n1 = 13;  // a sub-range, as a thread would get
  const int64_t ldy = n + 3;
  const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
  const auto w = RandomWeights(type, n, k, 7);
  auto x = testing::UniformFloats(size_t(t * k), 11);
  for (int64_t i = 0; i < kActivationBlock; ++i) x[size_t(i)] = 0.0f;  // a block of zeros
  x[size_t(k / 2)] = 30.0f;                                            // and an outlier

  // Weight rows dequantised by the scalar reference, with sum |w| per block for the
  // quantisation bound below.
  std::vector<float> wf(size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    DequantizeRow(type, w.data() + r * row_bytes, &wf[size_t(r * k)], k);

  std::vector<uint8_t> buffer(QuantizedActivationBytes(type, t, k) + 64);
  void* qx = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;

  testing::ForEachTarget([&] {
    QuantizeActivations(type, x.data(), t, k, qx);
    const std::vector<float> xq = DequantisedActivations(type, qx, t, k);
    const QuantizedActivations qa = ActivationView(type, qx, t, k);
    const bool half = type == DType::kF16 || type == DType::kBF16;
    std::vector<float> y(size_t(t * ldy), -999.0f);
    QuantMatmulRows(type, w.data(), row_bytes, qx, t, k, n0, n1, y.data(), ldy);

    double err2 = 0, expected_err2 = 0;
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t o = 0; o < n; ++o) {
        const float got = y[size_t(r * ldy + o)];
        if (o < n0 || o >= n1) {
          EXPECT_EQ(got, -999.0f) << "wrote outside [n0, n1): row " << o;
          continue;
        }
        const float* wr = &wf[size_t(o * k)];
        const float* xr = &x[size_t(r * k)];
        const float* qr = &xq[size_t(r * k)];
        double exact = 0, norm = 0, full = 0, bound = 0;
        for (int64_t i = 0; i < k; ++i) {
          // Rounding to the nearest step d leaves an error ~ U(-d/2, d/2): variance d^2/12.
          const double d = half ? 0.0 : qa.d[(r * k + i) / kActivationBlock];
          expected_err2 += double(wr[i]) * wr[i] * d * d / 12;
          exact += double(wr[i]) * qr[i];
          norm += std::fabs(double(wr[i]) * qr[i]);
          full += double(wr[i]) * xr[i];
          // |x - d q| <= d / 2 per element, with d = max |x of the block| / 127.
          bound += std::fabs(double(wr[i])) * std::fabs(double(xr[i] - qr[i]));
        }
        // 1. The integer kernel computes W . x_q exactly up to f32 rounding.
        EXPECT_NEAR(got, exact, 1e-4 * std::fabs(exact) + 2e-6 * norm + 1e-6)
            << Name(type) << " t=" << t << " k=" << k << " row " << r << " col " << o;
        // 2. Against f32 x: the error is exactly sum w (x_q - x), so bounded by
        //    sum |w| |x_q - x| <= sum |w| d / 2 (plus f32 rounding).
        EXPECT_NEAR(got, full, bound + 1e-4 * std::fabs(full) + 2e-6 * norm + 1e-6)
            << Name(type) << " t=" << t << " k=" << k << " row " << r << " col " << o;
        err2 += (got - full) * (got - full);
        expected_err2 += 1e-12 * norm * norm;  // f32 rounding
      }
    }
    // 3. In aggregate the error is of the size that rounding x to 8 bits predicts
    //    (about 0.4% relative for uniform x; f16 / bf16 keep x in f32 and are exact).
    //    The outputs share x and, for q4_1 / q4_k, a common weight offset, so the
    //    sum is nearly one chi-square sample: allow 10x (p ~ 0.2%).
    EXPECT_LT(err2, 10 * expected_err2) << Name(type);
  });
}

// The integer types of the low-bit releases (quant_matmul_x86_blocks-inl.h,
// quant_matmul_unpack-inl.h), each against its gguf-exact dequantiser.
constexpr DType kLowBitTypes[] = {DType::kQ5_0,   DType::kQ5_1,   DType::kQ2_K,    DType::kQ3_K,
                                  DType::kIQ4_NL, DType::kIQ4_XS, DType::kIQ2_XXS, DType::kMXFP4,
                                  DType::kIQ2_XS, DType::kIQ2_S,  DType::kIQ3_XXS, DType::kIQ3_S,
                                  DType::kIQ1_S,  DType::kIQ1_M,  DType::kQ5_K};

INSTANTIATE_TEST_SUITE_P(
    AllTypes, QuantMatmul,
    ::testing::Combine(::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K,
                                         DType::kQ6_K, DType::kF16, DType::kBF16),
                       ::testing::Values(int64_t(1), int64_t(2), int64_t(3), int64_t(8), int64_t(33)),
                       ::testing::Values(int64_t(256), int64_t(512), int64_t(4096 + 256))),
    ShapeName);

INSTANTIATE_TEST_SUITE_P(
    LowBitTypes, QuantMatmul,
    ::testing::Combine(::testing::ValuesIn(kLowBitTypes),
                       ::testing::Values(int64_t(1), int64_t(2), int64_t(5), int64_t(33)),
                       ::testing::Values(int64_t(256), int64_t(4096 + 256))),
    ShapeName);

// iq2_xxs decodes each group of 8 through a codebook row and a 7-bit sign
// pattern (AVX-512: byte-permute tables built from the codebook; AVX2: row
// loads; elsewhere the unpacked int16 path). Weights built so that every row
// of 5 takes each of the 256 codebook rows once, every sign pattern and every
// 4-bit block scale, against the reference dequantiser on every target: a
// wrong table entry would miss by a whole grid step.
TEST(QuantMatmul, Iq2XxsTakesEveryCodebookRowSignPatternAndScale) {
  const DType type = DType::kIQ2_XXS;
  const int64_t n = 5, k = 8 * 256, t = 3;  // 5 rows: a tile of 4 and one alone
  const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
  std::vector<uint8_t> w(row_bytes * size_t(n));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t sb = 0; sb < k / 256; ++sb) {
      uint8_t* super = w.data() + size_t(r) * row_bytes + size_t(sb) * 66;
      const uint16_t d = F32ToF16(0.003f * float(1 + sb + r));
      std::memcpy(super, &d, 2);
      for (int64_t blk = 0; blk < 8; ++blk) {
        const int64_t g0 = 32 * sb + 4 * blk;  // the row's group index
        uint32_t aux = uint32_t((blk + sb + r) % 16) << 28;
        for (int64_t l = 0; l < 4; ++l) {
          super[2 + 8 * blk + l] = uint8_t((g0 + l + 37 * r) % 256);
          aux |= uint32_t((g0 + l + 29 * r) % 128) << (7 * l);
        }
        std::memcpy(super + 2 + 8 * blk + 4, &aux, 4);
      }
    }
  }
  std::vector<float> wf(size_t(n * k));
  for (int64_t r = 0; r < n; ++r) DequantizeRow(type, w.data() + r * row_bytes, &wf[size_t(r * k)], k);
  auto x = testing::UniformFloats(size_t(t * k), 21);
  for (int64_t i = 0; i < k; ++i) x[size_t(i)] = (i * 7919) % 3 ? 2.0f : -2.0f;  // int8 +-127
  std::vector<uint8_t> qx(QuantizedActivationBytes(type, t, k));
  testing::ForEachTarget([&] {
    QuantizeActivations(type, x.data(), t, k, qx.data());
    const std::vector<float> xq = DequantisedActivations(type, qx.data(), t, k);
    std::vector<float> y(size_t(t * n));
    QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 0, n, y.data(), n);
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t o = 0; o < n; ++o) {
        double exact = 0, norm = 0;
        for (int64_t i = 0; i < k; ++i) {
          exact += double(wf[size_t(o * k + i)]) * xq[size_t(r * k + i)];
          norm += std::fabs(double(wf[size_t(o * k + i)]) * xq[size_t(r * k + i)]);
        }
        EXPECT_NEAR(y[size_t(r * n + o)], exact, 1e-6 * norm) << "row " << r << " col " << o;
      }
    }
  });
}

// A row's result must not depend on the rows it is batched with (a sequence
// decodes to the same tokens alone and in a serving batch): every output of a
// 40-row call equals, bit for bit, the same row multiplied alone, whichever
// kernel each took (packed panels for many rows, tiles of 8 and 4 and the
// rest, row by row for one), on every target and for every type; and the same
// for weights stored as panels where the target has panel kernels.
TEST(QuantMatmul, ARowsResultDoesNotDependOnTheBatch) {
  const int64_t t = 40, n = 21, k = 64 * 32 + 96;  // panels + a tail; two K chunks
  testing::ForEachTarget([&] {
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K,
                     DType::kF16, DType::kBF16, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K,
                     DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kIQ2_XXS,
                     DType::kMXFP4, DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS,
                     DType::kIQ3_S, DType::kIQ1_S, DType::kIQ1_M, DType::kQ5_K}) {
    const int64_t kk = Info(type).block_elems == 256 ? k / 256 * 256 : k;
    const size_t row_bytes = BytesFor(type, uint64_t(kk)).value();
    const auto w = RandomWeights(type, n, kk, 5);
    const auto x = testing::UniformFloats(size_t(t * kk), 6);
    std::vector<uint8_t> batch(QuantizedActivationBytes(type, t, kk));
    QuantizeActivations(type, x.data(), t, kk, batch.data());
    std::vector<uint8_t> one(QuantizedActivationBytes(type, 1, kk));
    // The file layout, and panels (16 of the 21 rows) where there are kernels for them.
    const bool panels = HasPanelKernels(type);
    std::vector<uint8_t> stored(panels ? 16 * row_bytes : 0);
    if (panels) PackPanels(type, w.data(), 16, kk, stored.data());
    for (bool use_panels : {false, true}) {
      if (use_panels && !panels) continue;
      const int64_t rows = use_panels ? 16 : n;
      auto multiply = [&](const void* qx, int64_t tt, float* y) {
        if (use_panels) {
          PanelMatmulRows(type, stored.data(), row_bytes, qx, tt, kk, 0, 16, y, rows);
        } else {
          QuantMatmulRows(type, w.data(), row_bytes, qx, tt, kk, 0, n, y, rows);
        }
      };
      std::vector<float> y(size_t(t * rows)), alone(static_cast<size_t>(rows));
      multiply(batch.data(), t, y.data());
      for (int64_t r = 0; r < t; ++r) {
        QuantizeActivations(type, x.data() + r * kk, 1, kk, one.data());
        multiply(one.data(), 1, alone.data());
        for (int64_t o = 0; o < rows; ++o) {
          ASSERT_EQ(y[size_t(r * rows + o)], alone[size_t(o)])
              << Name(type) << (use_panels ? " panels" : " file layout") << " row " << r
              << " col " << o;
        }
      }
    }
  }
  });
}

// Weights stored in the panel layout (PackPanels, what the CPU backend does at
// load) give the file layout's results bit for bit, for every row count, every
// row range a thread may take, and K over several chunks, on every target
// with panel kernels (x86: AVX-512 VNNI, AVX2 with and without VNNI; ARM with
// dotprod: sdot / smmla, the ARM flavour of the layout).
TEST(QuantMatmul, PanelLayoutGivesTheFileLayoutsBits) {
  const int64_t n = 40, k = 64 * 32 + 96;
  int targets_with_panels = 0;
  testing::ForEachTarget([&] {
  if (!HasPanelKernels(DType::kQ8_0)) return;
  ++targets_with_panels;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    ASSERT_TRUE(HasPanelKernels(type)) << Name(type);
    const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
    const auto w = RandomWeights(type, n, k, 7);
    std::vector<uint8_t> panels(w.size());
    PackPanels(type, w.data(), n, k, panels.data());
    EXPECT_NE(panels, w);
    // 40 rows: several tiles of the AVX-512 GEMM and a remainder; 200 rows:
    // two activation slabs at this k.
    for (int64_t t : {1, 2, 3, 4, 5, 8, 9, 13, 40, 200}) {
      const auto x = testing::UniformFloats(size_t(t * k), uint32_t(8 + t));
      std::vector<uint8_t> qx(QuantizedActivationBytes(type, t, k));
      QuantizeActivations(type, x.data(), t, k, qx.data());
      std::vector<float> want(size_t(t * n)), got(size_t(t * n), -1.0f);
      QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 0, n, want.data(), n);
      PanelMatmulRows(type, panels.data(), row_bytes, qx.data(), t, k, 0, 16, got.data(), n);
      PanelMatmulRows(type, panels.data(), row_bytes, qx.data(), t, k, 16, n, got.data(), n);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << Name(type) << " t=" << t << " at " << i;
      }
    }
  }
  });
#if HWY_ARCH_X86
  if ((hwy::SupportedTargets() & HWY_AVX2) == 0) GTEST_SKIP() << "no AVX2 here";
  EXPECT_GE(targets_with_panels, HasVnniTarget() ? 2 : 1)
      << "avx2, and avx2-vnni / avx512-vnni where the CPU has VNNI";
#else
  if (targets_with_panels == 0) GTEST_SKIP() << "no target with panel kernels here";
#endif
}

#if HWY_ARCH_X86
// The x86 integer kernels compute each output the same way in every dot form
// (EVEX or VEX vpdpbusd, vpmaddubsw + vpmaddwd): every x86 target with them
// gives the same bits, file layout and panels. The first row's activations
// are +-max in each block, so every int8 is +-127, and the weights take every
// byte value: a dot form that saturated (vpmaddubsw pairs of q8_0 + 128, say)
// would differ. Where the CPU has AVX-VNNI, "avx2-vnni" runs its VEX form;
// elsewhere the EVEX form of the same instruction (cpu_target.h).
TEST(QuantMatmul, X86TargetsGiveTheSameBits) {
  const int64_t n = 24, k = 512, t = 5;
  if ((hwy::SupportedTargets() & HWY_AVX2) == 0) GTEST_SKIP() << "no AVX2 here";
  if (!HasVnniTarget()) GTEST_SKIP() << "no vpdpbusd target here: only one dot form to compare";
  auto x = testing::UniformFloats(size_t(t * k), 10);
  std::mt19937 rng(10);
  for (int64_t i = 0; i < k; ++i) x[size_t(i)] = (rng() & 1) ? 1.5f : -1.5f;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ6_K, DType::kQ5_0,
                     DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS,
                     DType::kIQ2_XXS, DType::kMXFP4, DType::kIQ2_XS, DType::kIQ2_S,
                     DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ1_S, DType::kIQ1_M}) {
    const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
    const auto w = RandomWeights(type, n, k, 9);
    std::vector<uint8_t> panels(w.size());
    if (HasPanelLayout(type)) PackPanels(type, w.data(), n, k, panels.data());
    std::vector<uint8_t> qx(QuantizedActivationBytes(type, t, k));
    std::vector<float> first;
    std::string first_target;
    int compared = 0;
    testing::ForEachTarget([&] {
      const int64_t target = ActiveCpuTarget().highway;
      if (target != HWY_AVX3_DL && target != HWY_AVX2) return;
      QuantizeActivations(type, x.data(), t, k, qx.data());
      std::vector<float> y(size_t(t * n)), yp(size_t(t * n));
      QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 0, n, y.data(), n);
      if (HasPanelKernels(type)) {
        PanelMatmulRows(type, panels.data(), row_bytes, qx.data(), t, k, 0, n, yp.data(), n);
        EXPECT_EQ(yp, y) << Name(type) << " panels";
      }
      if (first.empty()) {
        first = y;
        first_target = ActiveCpuTarget().name;
        return;
      }
      ++compared;
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], first[i]) << Name(type) << " against " << first_target << " at " << i;
      }
    });
    EXPECT_GE(compared, 1) << Name(type) << ": avx2 against a vpdpbusd target at least";
  }
}
#endif

// A row read back from panels (the CPU backend's embedding lookup in a table
// stored as panels) is the file's row, byte for byte, in this architecture's
// flavour of the layout.
TEST(PanelLayout, UnpackPanelRowInvertsPackPanels) {
  const int64_t n = 16, k = 4 * 32;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
    const auto w = RandomWeights(type, n, k, 11);
    std::vector<uint8_t> panels(w.size()), row(row_bytes);
    PackPanels(type, w.data(), n, k, panels.data());
    EXPECT_NE(panels, w) << Name(type);  // the layout does move bytes
    for (int64_t r = 0; r < n; ++r) {
      UnpackPanelRow(type, panels.data(), r, k, row.data());
      ASSERT_TRUE(std::equal(row.begin(), row.end(), w.begin() + r * int64_t(row_bytes)))
          << Name(type) << " row " << r;
    }
  }
}

// PackPanels writes, byte for byte, the layout panel_layout.h documents (this
// architecture's flavour), computed here from that text: values vectors per
// block, then the 8 rows' f16 scales, then (q4_1) their mins. 24 rows, 7
// blocks: several groups, an odd block count.
TEST(PanelLayout, PackPanelsWritesTheDocumentedLayout) {
  const int64_t n = 24, k = 7 * 32, nb = k / 32;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    const size_t block_bytes = size_t(Info(type).block_bytes);
    const size_t row_bytes = size_t(nb) * block_bytes, value_bytes = PanelValueBytes(type);
    const bool q8 = type == DType::kQ8_0, has_min = type == DType::kQ4_1;
    const size_t quants = has_min ? 4 : 2, quant_bytes = q8 ? 32 : 16;
    const auto w = RandomWeights(type, n, k, 12);
    std::vector<uint8_t> want(w.size()), got(w.size());
    for (int64_t g = 0; g < n / 8; ++g) {
      uint8_t* values = want.data() + size_t(g) * 8 * row_bytes;
      uint8_t* scales = values + size_t(nb) * value_bytes;
      uint8_t* mins = scales + size_t(nb) * 16;
      for (int64_t b = 0; b < nb; ++b) {
        for (size_t j = 0; j < 8; ++j) {
          const uint8_t* blk = w.data() + (size_t(g) * 8 + j) * row_bytes + size_t(b) * block_bytes;
          uint8_t* v = values + size_t(b) * value_bytes;
          for (size_t i = 0; i < quant_bytes; ++i) {
#if HWY_ARCH_ARM_A64
            // Pair j / 2, vector (value_bytes / 64) (j / 2) + i / 8: 8 bytes of
            // row 2p, then 8 of row 2p + 1; q4 bytes XOR 0x88.
            const size_t at = 16 * ((value_bytes / 64) * (j / 2) + i / 8) + 8 * (j % 2) + i % 8;
            want[size_t(v - want.data()) + at] = uint8_t(blk[quants + i] ^ (q8 ? 0 : 0x88));
#else
            // Vector i / 4, lane j: bytes 4c..4c+3 of row j; q8_0 + 128.
            want[size_t(v - want.data()) + 32 * (i / 4) + 4 * j + i % 4] =
                uint8_t(blk[quants + i] ^ (q8 ? 0x80 : 0));
#endif
          }
          std::memcpy(scales + (size_t(b) * 8 + j) * 2, blk, 2);
          if (has_min) std::memcpy(mins + (size_t(b) * 8 + j) * 2, blk + 2, 2);
        }
      }
    }
    PackPanels(type, w.data(), n, k, got.data());
    EXPECT_EQ(got, want) << Name(type);
  }
}

TEST(PanelLayout, IsDefinedForTheThreePanelTypesOnly) {
  EXPECT_TRUE(HasPanelLayout(DType::kQ8_0));
  EXPECT_TRUE(HasPanelLayout(DType::kQ4_0));
  EXPECT_TRUE(HasPanelLayout(DType::kQ4_1));
  EXPECT_FALSE(HasPanelLayout(DType::kQ4_K));
  EXPECT_FALSE(HasPanelLayout(DType::kF16));
  // The x86 kernels (AVX-512 VNNI, AVX2 with or without AVX-VNNI) and ARM's
  // with dotprod read panels; elsewhere nothing is packed.
  testing::ForEachTarget([] {
    const CpuTarget& target = ActiveCpuTarget();
#if HWY_ARCH_X86
    const bool x86_kernels = target.highway == HWY_AVX3_DL || target.highway == HWY_AVX2;
#else
    const bool x86_kernels = false;
#endif
    const bool panels =
        x86_kernels || (target.extensions & uint32_t(CpuExtension::kDotProd)) != 0;
    EXPECT_EQ(HasPanelKernels(DType::kQ8_0), panels) << target.name;
    EXPECT_FALSE(HasPanelKernels(DType::kQ4_K)) << target.name;
    // They serve every row count, so no switch to the f32 kernels breaks
    // batch invariance at some batch size.
    if (panels) {
      for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
        EXPECT_EQ(IntegerMatmulMaxRows(type), INT64_MAX) << Name(type);
      }
    }
  });
}

TEST(QuantizeActivations, RoundsToNearestWithPerBlockScalesAndSums) {
  const int64_t t = 2, k = 96;
  auto x = testing::UniformFloats(size_t(t * k), 3);
  for (int64_t i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;
  std::vector<uint8_t> buffer(QuantizedActivationBytes(DType::kQ8_0, t, k));
  testing::ForEachTarget([&] {
    QuantizeActivations(DType::kQ8_0, x.data(), t, k, buffer.data());
    const QuantizedActivations qa = ActivationView(DType::kQ8_0, buffer.data(), t, k);
    for (int64_t b = 0; b < t * k / kActivationBlock; ++b) {
      float amax = 0;
      int sum = 0;
      for (int64_t i = 0; i < kActivationBlock; ++i) {
        amax = std::max(amax, std::fabs(x[size_t(b * kActivationBlock + i)]));
        sum += qa.qs[b * kActivationBlock + i];
      }
      EXPECT_FLOAT_EQ(qa.d[b], amax / 127.0f) << b;
      EXPECT_FLOAT_EQ(qa.s[b], qa.d[b] * float(sum)) << b;
      EXPECT_EQ(qa.sum[b], sum) << b;
      for (int64_t i = 0; i < kActivationBlock; ++i) {
        const float xi = x[size_t(b * kActivationBlock + i)];
        EXPECT_LE(std::fabs(xi - qa.d[b] * qa.qs[b * kActivationBlock + i]),
                  qa.d[b] * 0.5001f + 1e-12f);
      }
    }
  });
}

TEST(QuantMatmul, SupportsExactlyTheListedTypes) {
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K, DType::kF16,
                  DType::kBF16}) {
    EXPECT_TRUE(IsQuantMatmulSupported(t)) << Name(t);
  }
  for (DType t : kLowBitTypes) EXPECT_TRUE(IsQuantMatmulSupported(t)) << Name(t);
  for (DType t : {DType::kF32, DType::kI32, DType::kF8_E4M3})
    EXPECT_FALSE(IsQuantMatmulSupported(t)) << Name(t);
}

// The GGUF weight types of the released files (llama.cpp's quantisation
// mixes: Q*_K_M, IQ*_M, the "dynamic" IQ1 / IQ2 releases, MXFP4), each with
// an integer kernel for decode wherever q8_0 has one (every target), never
// the per-row dequantise + f32 path; and where q8_0 takes the register-
// blocked x86 int8 kernels (AVX2, AVX-VNNI, AVX-512 VNNI), every type but
// q4_k / q5_k (Highway's per-chunk kernels there) takes them too.
TEST(QuantMatmul, EveryReleasedWeightTypeHasAnIntegerKernel) {
  const DType released[] = {DType::kQ8_0,   DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0,
                            DType::kQ5_1,   DType::kQ2_K,   DType::kQ3_K,  DType::kQ4_K,
                            DType::kQ5_K,   DType::kQ6_K,   DType::kIQ1_S, DType::kIQ1_M,
                            DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS,
                            DType::kIQ3_S,  DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4};
  testing::ForEachTarget([&] {
    const std::string q8 = DecodeMatmulKernel(DType::kQ8_0);
    ASSERT_NE(q8, "dequant-f32");
    for (DType type : released) {
      const std::string kernel = DecodeMatmulKernel(type);
      EXPECT_TRUE(IsQuantMatmulSupported(type)) << Name(type);
      EXPECT_NE(kernel, "dequant-f32") << Name(type);
      if (q8 == "int8-x86" && type != DType::kQ4_K && type != DType::kQ5_K) {
        EXPECT_EQ(kernel, "int8-x86") << Name(type);
      }
    }
  });
  EXPECT_STREQ(DecodeMatmulKernel(DType::kF16), "f32-widened");
  EXPECT_STREQ(DecodeMatmulKernel(DType::kF8_E4M3), "dequant-f32");
}

TEST(QuantMatmul, EmptyRangeWritesNothing) {
  const int64_t t = 2, k = 64;
  const auto w = RandomWeights(DType::kQ8_0, 1, k, 1);
  const auto x = testing::UniformFloats(size_t(t * k), 2);
  std::vector<uint8_t> buffer(QuantizedActivationBytes(DType::kQ8_0, t, k));
  QuantizeActivations(DType::kQ8_0, x.data(), t, k, buffer.data());
  std::vector<float> y(2, 5.0f);
  QuantMatmulRows(DType::kQ8_0, w.data(), w.size(), buffer.data(), t, k, 1, 1, y.data(), 1);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[1], 5.0f);
}

}  // namespace
}  // namespace anymoe::kernels
