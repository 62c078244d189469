// The f32-activation matmul (float_matmul.h) on every CPU kernel target: against
// a double-precision reference for f32 / f16 / bf16 weights, and batch-invariant
// bit for bit: a row's outputs do not depend on how many rows came with it, on
// the weight-row range a thread takes, or on the row strides.
#include "backends/cpu/kernels/float_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/kernels/for_each_target.h"
#include "core/half.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

// n x k weights of `type` (f32 values rounded to the type) and their f32 values.
std::vector<uint8_t> Weights(DType type, int64_t n, int64_t k, std::vector<float>& as_f32) {
  as_f32 = testing::UniformFloats(size_t(n * k), 11);
  const size_t width = type == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> bytes(size_t(n * k) * width);
  for (size_t i = 0; i < as_f32.size(); ++i) {
    if (type == DType::kF32) {
      std::memcpy(&bytes[i * 4], &as_f32[i], 4);
      continue;
    }
    const uint16_t h = type == DType::kF16 ? F32ToF16(as_f32[i]) : F32ToBF16(as_f32[i]);
    as_f32[i] = type == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
    std::memcpy(&bytes[i * 2], &h, 2);
  }
  return bytes;
}

class FloatMatmul : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(FloatMatmul, MatchesTheDoubleReference) {
  const auto [type, k] = GetParam();
  const int64_t n = 13, t = 7, ldx = k + 3, ldy = n + 2;
  std::vector<float> wf;
  const auto w = Weights(type, n, k, wf);
  const size_t row_bytes = w.size() / size_t(n);
  const auto x = testing::UniformFloats(size_t(t * ldx), 12);
  testing::ForEachTarget([&] {
    std::vector<float> y(size_t(t * ldy), -999.0f);
    FloatMatmulRows(type, w.data(), row_bytes, x.data(), ldx, t, k, 2, n, y.data(), ldy);
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t o = 0; o < ldy; ++o) {
        const float got = y[size_t(r * ldy + o)];
        if (o < 2 || o >= n) {
          EXPECT_EQ(got, -999.0f) << "wrote outside [n0, n1): row " << r << " col " << o;
          continue;
        }
        double want = 0, norm = 0;
        for (int64_t i = 0; i < k; ++i) {
          want += double(wf[size_t(o * k + i)]) * x[size_t(r * ldx + i)];
          norm += std::fabs(double(wf[size_t(o * k + i)]) * x[size_t(r * ldx + i)]);
        }
        EXPECT_NEAR(got, want, 1e-6 * norm + 1e-7) << Name(type) << " row " << r << " col " << o;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Types, FloatMatmul,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16),
                                            ::testing::Values(int64_t(1), int64_t(7), int64_t(64),
                                                              int64_t(576), int64_t(1000))),
                         [](const auto& info) {
                           return std::string(Name(std::get<0>(info.param))) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Every output of a 37-row call equals, bit for bit, the same row multiplied
// alone, and the same call split into weight-row ranges of every size (as
// threads take them), with other strides.
TEST(FloatMatmul, ARowsResultDoesNotDependOnTheBatchOrTheSplit) {
  const int64_t t = 37, n = 23, k = 333;  // k: whole vectors and a tail on every target
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<float> wf;
    const auto w = Weights(type, n, k, wf);
    const size_t row_bytes = w.size() / size_t(n);
    const auto x = testing::UniformFloats(size_t(t * k), 13);
    testing::ForEachTarget([&] {
      std::vector<float> all(size_t(t * n));
      FloatMatmulRows(type, w.data(), row_bytes, x.data(), k, t, k, 0, n, all.data(), n);
      std::vector<float> alone(static_cast<size_t>(n));
      for (int64_t r = 0; r < t; ++r) {
        FloatMatmulRows(type, w.data(), row_bytes, x.data() + r * k, k, 1, k, 0, n, alone.data(),
                        n);
        for (int64_t o = 0; o < n; ++o) {
          ASSERT_EQ(all[size_t(r * n + o)], alone[size_t(o)])
              << Name(type) << " row " << r << " col " << o;
        }
      }
      for (int64_t split = 1; split <= n; ++split) {
        std::vector<float> y(size_t(t * (n + 5)));
        for (int64_t n0 = 0; n0 < n; n0 += split) {
          FloatMatmulRows(type, w.data(), row_bytes, x.data(), k, t, k, n0, std::min(n, n0 + split),
                          y.data(), n + 5);
        }
        for (int64_t r = 0; r < t; ++r) {
          for (int64_t o = 0; o < n; ++o) {
            ASSERT_EQ(y[size_t(r * (n + 5) + o)], all[size_t(r * n + o)])
                << Name(type) << " split " << split << " row " << r << " col " << o;
          }
        }
      }
    });
  }
}

}  // namespace
}  // namespace anymoe::kernels
