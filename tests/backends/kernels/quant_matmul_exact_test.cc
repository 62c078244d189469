// The integer kernels whose arithmetic is defined exactly (every ARM target
// with dotprod: neon-dotprod, neon-i8mm, sve, sve2; and AVX-512 VNNI for q8_0 /
// q4_0 / q4_1), from the file layout and from weights stored as panels where
// the target has panel kernels, against a scalar model of that arithmetic, bit
// for bit: per block an exact integer dot, then acc = fma(float(idot), dw * dx,
// acc) (and acc = fma(cw, s, acc) for a min term) over chunks of 64 blocks,
// each chunk added to y in order. So these targets give the same bits as each
// other, whatever the number of activation rows, the row range a thread takes,
// the SIMD vector length (SVE) or whether sdot or smmla formed the dots.
#define HWY_WANT_AVX3_DL  // so the VNNI target is listed where the CPU has it

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "backends/kernels/random_weights.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

float F16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// What one block of 32 weights contributes, in the model's terms: its integer
// weights (signed), the scale of each half of 16 (1 where there is none),
// dw and the min term's cw (0: none).
struct ModelBlock {
  int32_t q[32];
  int32_t half_scale[2] = {1, 1};
  float dw = 0, cw = 0;
};

// Block b of a weight row, from the GGUF layouts (ggml's block_q8_0, block_q4_0,
// block_q4_1, block_q4_K, block_q6_K).
ModelBlock ReadBlock(DType type, const uint8_t* row, int64_t b) {
  ModelBlock m;
  switch (type) {
    case DType::kQ8_0: {
      const uint8_t* blk = row + b * 34;
      m.dw = F16At(blk);
      for (int i = 0; i < 32; ++i) m.q[i] = int8_t(blk[2 + i]);
      break;
    }
    case DType::kQ4_0:
    case DType::kQ4_1: {
      const bool q4_1 = type == DType::kQ4_1;
      const uint8_t* blk = row + b * (q4_1 ? 20 : 18);
      const uint8_t* qs = blk + (q4_1 ? 4 : 2);
      m.dw = F16At(blk);
      if (q4_1) m.cw = F16At(blk + 2);
      for (int i = 0; i < 16; ++i) {
        m.q[i] = (qs[i] & 15) - (q4_1 ? 0 : 8);
        m.q[i + 16] = (qs[i] >> 4) - (q4_1 ? 0 : 8);
      }
      break;
    }
    case DType::kQ4_K: {
      const uint8_t* super = row + (b / 8) * 144;
      const uint8_t* s = super + 4;
      const int j = int(b % 8);
      int sc, mn;
      if (j < 4) {
        sc = s[j] & 63;
        mn = s[j + 4] & 63;
      } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      }
      m.dw = F16At(super) * float(sc);     // exact: f16 x 6 bits
      m.cw = -F16At(super + 2) * float(mn);  // exact
      const uint8_t* qs = super + 16 + 32 * (j / 2);
      for (int i = 0; i < 32; ++i) m.q[i] = j % 2 == 0 ? qs[i] & 15 : qs[i] >> 4;
      break;
    }
    case DType::kQ6_K: {
      const uint8_t* super = row + (b / 8) * 210;
      const int j = int(b % 8), half = j / 4, part = j % 4;
      const uint8_t* ql = super + 64 * half + 32 * (part % 2);
      const uint8_t* qh = super + 128 + 32 * half;
      for (int i = 0; i < 32; ++i) {
        const int low = part < 2 ? ql[i] & 15 : ql[i] >> 4;
        m.q[i] = (low | (((qh[i] >> (2 * part)) & 3) << 4)) - 32;
      }
      m.half_scale[0] = int8_t(super[192 + 2 * j]);
      m.half_scale[1] = int8_t(super[192 + 2 * j + 1]);
      m.dw = F16At(super + 208);
      break;
    }
    default:
      ADD_FAILURE() << "no model for " << Name(type);
  }
  return m;
}

// y for activation row r and one weight row, as the exact kernels compute it.
float ModelOutput(DType type, const uint8_t* row, const QuantizedActivations& x, int64_t r) {
  const int64_t nb = x.k / 32;
  float y = 0;
  for (int64_t b0 = 0; b0 < nb; b0 += 64) {
    float acc = 0;
    for (int64_t b = b0; b < std::min(nb, b0 + 64); ++b) {
      const ModelBlock m = ReadBlock(type, row, b);
      const int8_t* xq = x.qs + (r * nb + b) * 32;
      int32_t idot = 0;
      for (int h = 0; h < 2; ++h) {
        int32_t half = 0;
        for (int i = 16 * h; i < 16 * h + 16; ++i) half += m.q[i] * xq[i];
        idot += m.half_scale[h] * half;
      }
      acc = std::fma(float(idot), m.dw * x.d[r * nb + b], acc);
      if (m.cw != 0) acc = std::fma(m.cw, x.s[r * nb + b], acc);
    }
    y = b0 == 0 ? acc : y + acc;
  }
  return y;
}

// The types whose kernels on `target` follow the model.
std::vector<DType> ExactTypes(const CpuTarget& target) {
  if (target.extensions & uint32_t(CpuExtension::kDotProd)) {
    return {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K};
  }
  if (target.name == "avx512-vnni") return {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};
  return {};
}

TEST(ExactIntegerKernels, GiveTheModelsBitsOnEveryTargetAndBatch) {
  const int64_t n = 13, k = 9 * 256;  // a tail of rows; 72 blocks: two chunks
  int checked = 0;
  for (const CpuTarget& target : AvailableCpuTargets()) {
    const std::vector<DType> types = ExactTypes(target);
    if (types.empty()) continue;
    ASSERT_TRUE(SelectCpuTarget(target.name).ok());
    for (DType type : types) {
      const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
      const auto w = RandomWeights(type, n, k, 3);
      for (int64_t t : {1, 2, 3, 4, 5, 8}) {
        auto xf = testing::UniformFloats(size_t(t * k), uint32_t(20 + t));
        xf[7] = 40.0f;  // an outlier: a block with large integers
        std::vector<uint8_t> qx(QuantizedActivationBytes(type, t, k));
        QuantizeActivations(type, xf.data(), t, k, qx.data());
        const QuantizedActivations x = ActivationView(type, qx.data(), t, k);
        std::vector<float> y(size_t(t * n), -1.0f);
        // Two row ranges, as two threads would take them (the first ends
        // inside a group of 4 rows).
        QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 0, 6, y.data(), n);
        QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 6, n, y.data(), n);
        // And the first 8 rows from weights stored as panels (the CPU
        // backend's default where the target has panel kernels).
        std::vector<float> yp(size_t(t * n), -1.0f);
        const bool panels = HasPanelKernels(type);
        if (panels) {
          std::vector<uint8_t> packed(row_bytes * 8);
          PackPanels(type, w.data(), 8, k, packed.data());
          PanelMatmulRows(type, packed.data(), row_bytes, qx.data(), t, k, 0, 8, yp.data(), n);
        }
        for (int64_t r = 0; r < t; ++r) {
          for (int64_t o = 0; o < n; ++o) {
            const float want = ModelOutput(type, w.data() + o * row_bytes, x, r);
            ASSERT_EQ(y[size_t(r * n + o)], want)
                << target.name << " " << Name(type) << " t=" << t << " row " << r << " col " << o;
            if (panels && o < 8) {
              ASSERT_EQ(yp[size_t(r * n + o)], want) << target.name << " panels " << Name(type)
                                                     << " t=" << t << " row " << r << " col " << o;
            }
          }
        }
        ++checked;
      }
    }
  }
  ASSERT_TRUE(SelectCpuTarget("best").ok());
#if HWY_ARCH_ARM_A64
  // Under qemu's `max` CPU (make test-arm64) and on any ARM CPU with dotprod,
  // something must have been checked.
  if (AvailableCpuTargets().front().extensions & uint32_t(CpuExtension::kDotProd)) {
    EXPECT_GT(checked, 0);
  }
#endif
  if (checked == 0) GTEST_SKIP() << "no target with exactly defined integer kernels here";
}

}  // namespace
}  // namespace anymoe::kernels
