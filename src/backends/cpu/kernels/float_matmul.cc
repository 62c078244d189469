// f32-activation matmul against f32 / f16 / bf16 weight rows (float_matmul.h),
// compiled once per Highway target. A register tile of 4 weight rows x up to
// kMR activation rows (8 x 1 for a single row) keeps one vector accumulator
// per output; every output, in whichever tile and whichever position of it,
// runs the same instructions on its own accumulator (loads, FMAs in k order,
// the same reduction, the same tail), which is what makes the products
// batch-invariant. Short weight groups repeat their last row and drop it.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/float_matmul.cc"
#include "backends/cpu/kernels/float_matmul.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Activation rows per register tile of 4 weight rows: 4 where the target has 32
// vector registers (16 accumulators + 4 activation vectors + 1 weight vector),
// 3 on x86 targets below AVX-512, which have 16.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kMR = 3;
#else
constexpr int kMR = 4;
#endif

// Activation rows per cache block: about 96 KiB of them stay in L2 while every
// 4-row weight group of the caller's range streams past once.
constexpr int64_t kBlockBytes = 96 * 1024;

HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const float* p) { return hn::LoadU(df, p); }
template <typename H>
HWY_INLINE hn::Vec<DF> LoadWeights(DF df, const H* p) {
  const hn::Rebind<H, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

inline float ScalarWeight(const float* p) { return *p; }
inline float ScalarWeight(const hwy::float16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16ToF32(bits);
}
inline float ScalarWeight(const hwy::bfloat16_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return BF16ToF32(bits);
}

HWY_INLINE float Total(DF df, hn::Vec<DF> a) { return hn::GetLane(hn::SumOfLanes(df, a)); }

// The k % lanes tail of out[j][r] = dot(w[j], x[r]), element by element after
// the vector part's reduction: every kernel below ends this way.
template <int NR, int MR, typename W>
HWY_INLINE void AddTail(const W* const* w, const float* const* x, int64_t i, int64_t k,
                        float (*out)[kMR]) {
  for (; i < k; ++i) {
    for (int j = 0; j < NR; ++j) {
      const float wj = ScalarWeight(w[j] + i);
      for (int r = 0; r < MR; ++r) out[j][r] += wj * x[r][i];
    }
  }
}

// out[j][r] = dot(w[j], x[r]) for 4 weight rows and MR <= kMR activation rows,
// one accumulator per output (named: SVE vectors cannot live in arrays).
template <int MR, typename W>
HWY_INLINE void Tile4(const W* const* w, const float* const* x, int64_t k, float (*out)[kMR]) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  auto a00 = hn::Zero(df), a10 = a00, a20 = a00, a30 = a00;
  [[maybe_unused]] auto a01 = a00, a11 = a00, a21 = a00, a31 = a00;
  [[maybe_unused]] auto a02 = a00, a12 = a00, a22 = a00, a32 = a00;
  [[maybe_unused]] auto a03 = a00, a13 = a00, a23 = a00, a33 = a00;
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    const auto x0 = hn::LoadU(df, x[0] + i);
    [[maybe_unused]] auto x1 = x0, x2 = x0, x3 = x0;
    if constexpr (MR > 1) x1 = hn::LoadU(df, x[1] + i);
    if constexpr (MR > 2) x2 = hn::LoadU(df, x[2] + i);
    if constexpr (MR > 3) x3 = hn::LoadU(df, x[3] + i);
    auto v = LoadWeights(df, w[0] + i);
    a00 = hn::MulAdd(v, x0, a00);
    if constexpr (MR > 1) a01 = hn::MulAdd(v, x1, a01);
    if constexpr (MR > 2) a02 = hn::MulAdd(v, x2, a02);
    if constexpr (MR > 3) a03 = hn::MulAdd(v, x3, a03);
    v = LoadWeights(df, w[1] + i);
    a10 = hn::MulAdd(v, x0, a10);
    if constexpr (MR > 1) a11 = hn::MulAdd(v, x1, a11);
    if constexpr (MR > 2) a12 = hn::MulAdd(v, x2, a12);
    if constexpr (MR > 3) a13 = hn::MulAdd(v, x3, a13);
    v = LoadWeights(df, w[2] + i);
    a20 = hn::MulAdd(v, x0, a20);
    if constexpr (MR > 1) a21 = hn::MulAdd(v, x1, a21);
    if constexpr (MR > 2) a22 = hn::MulAdd(v, x2, a22);
    if constexpr (MR > 3) a23 = hn::MulAdd(v, x3, a23);
    v = LoadWeights(df, w[3] + i);
    a30 = hn::MulAdd(v, x0, a30);
    if constexpr (MR > 1) a31 = hn::MulAdd(v, x1, a31);
    if constexpr (MR > 2) a32 = hn::MulAdd(v, x2, a32);
    if constexpr (MR > 3) a33 = hn::MulAdd(v, x3, a33);
  }
  out[0][0] = Total(df, a00), out[1][0] = Total(df, a10);
  out[2][0] = Total(df, a20), out[3][0] = Total(df, a30);
  if constexpr (MR > 1) {
    out[0][1] = Total(df, a01), out[1][1] = Total(df, a11);
    out[2][1] = Total(df, a21), out[3][1] = Total(df, a31);
  }
  if constexpr (MR > 2) {
    out[0][2] = Total(df, a02), out[1][2] = Total(df, a12);
    out[2][2] = Total(df, a22), out[3][2] = Total(df, a32);
  }
  if constexpr (MR > 3) {
    out[0][3] = Total(df, a03), out[1][3] = Total(df, a13);
    out[2][3] = Total(df, a23), out[3][3] = Total(df, a33);
  }
  AddTail<4, MR>(w, x, i, k, out);
}

// One activation row against 8 weight rows (decode): eight independent
// accumulators keep the FMA pipes busy where Tile4<1> would wait on four.
template <typename W>
HWY_INLINE void Tile8x1(const W* const* w, const float* x, int64_t k, float (*out)[kMR]) {
  const DF df;
  const int64_t lanes = int64_t(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    const auto v = hn::LoadU(df, x + i);
    a0 = hn::MulAdd(LoadWeights(df, w[0] + i), v, a0);
    a1 = hn::MulAdd(LoadWeights(df, w[1] + i), v, a1);
    a2 = hn::MulAdd(LoadWeights(df, w[2] + i), v, a2);
    a3 = hn::MulAdd(LoadWeights(df, w[3] + i), v, a3);
    a4 = hn::MulAdd(LoadWeights(df, w[4] + i), v, a4);
    a5 = hn::MulAdd(LoadWeights(df, w[5] + i), v, a5);
    a6 = hn::MulAdd(LoadWeights(df, w[6] + i), v, a6);
    a7 = hn::MulAdd(LoadWeights(df, w[7] + i), v, a7);
  }
  out[0][0] = Total(df, a0), out[1][0] = Total(df, a1), out[2][0] = Total(df, a2);
  out[3][0] = Total(df, a3), out[4][0] = Total(df, a4), out[5][0] = Total(df, a5);
  out[6][0] = Total(df, a6), out[7][0] = Total(df, a7);
  const float* xs[1] = {x};
  AddTail<8, 1>(w, xs, i, k, out);
}

template <typename W>
const W* RowAt(const uint8_t* w, size_t w_row_bytes, int64_t n) {
  return reinterpret_cast<const W*>(w + size_t(n) * w_row_bytes);
}

// One activation row: weight rows 8 at a time (repeating the last one in a
// short group and dropping those outputs).
template <typename W>
void SingleRow(const uint8_t* w, size_t w_row_bytes, const float* x, int64_t k, int64_t n0,
               int64_t n1, float* y) {
  for (int64_t n = n0; n < n1; n += 8) {
    const int nn = int(std::min<int64_t>(8, n1 - n));
    const W* wr[8];
    for (int j = 0; j < 8; ++j) wr[j] = RowAt<W>(w, w_row_bytes, n + std::min(j, nn - 1));
    float out[8][kMR];
    Tile8x1(wr, x, k, out);
    for (int j = 0; j < nn; ++j) y[n + j] = out[j][0];
  }
}

template <typename W>
void MatmulRows(const uint8_t* w, size_t w_row_bytes, const float* x, int64_t ldx, int64_t t,
                int64_t k, int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const int64_t block_rows =
      std::max<int64_t>(kMR, kBlockBytes / std::max<int64_t>(1, k * 4) / kMR * kMR);
  for (int64_t m0 = 0; m0 < t; m0 += block_rows) {
    const int64_t m1 = std::min(t, m0 + block_rows);
    for (int64_t n = n0; n < n1; n += 4) {
      const int nn = int(std::min<int64_t>(4, n1 - n));
      const W* wr[4];
      for (int j = 0; j < 4; ++j) wr[j] = RowAt<W>(w, w_row_bytes, n + std::min(j, nn - 1));
      for (int64_t r = m0; r < m1; r += kMR) {
        const int rr = int(std::min<int64_t>(kMR, m1 - r));
        const float* xr[kMR];
        for (int i = 0; i < rr; ++i) xr[i] = x + (r + i) * ldx;
        float out[8][kMR];
        if (rr == kMR) {
          Tile4<kMR>(wr, xr, k, out);
        } else if (rr == 1) {
          Tile4<1>(wr, xr, k, out);
        } else if (rr == 2) {
          Tile4<2>(wr, xr, k, out);
        } else {
          Tile4<3>(wr, xr, k, out);
        }
        for (int i = 0; i < rr; ++i) {
          for (int j = 0; j < nn; ++j) y[(r + i) * ldy + n + j] = out[j][i];
        }
      }
    }
  }
}

template <typename W>
void Rows(const uint8_t* w, size_t w_row_bytes, const float* x, int64_t ldx, int64_t t, int64_t k,
          int64_t n0, int64_t n1, float* y, int64_t ldy) {
  if (t == 1) return SingleRow<W>(w, w_row_bytes, x, k, n0, n1, y);
  MatmulRows<W>(w, w_row_bytes, x, ldx, t, k, n0, n1, y, ldy);
}

void FloatMatmulRowsImpl(DType type, const uint8_t* w, size_t w_row_bytes, const float* x,
                         int64_t ldx, int64_t t, int64_t k, int64_t n0, int64_t n1, float* y,
                         int64_t ldy) {
  switch (type) {
    case DType::kF32:
      return Rows<float>(w, w_row_bytes, x, ldx, t, k, n0, n1, y, ldy);
    case DType::kF16:
      return Rows<hwy::float16_t>(w, w_row_bytes, x, ldx, t, k, n0, n1, y, ldy);
    case DType::kBF16:
      return Rows<hwy::bfloat16_t>(w, w_row_bytes, x, ldx, t, k, n0, n1, y, ldy);
    default:
      CHECK(false && "float matmul: weights must be f32, f16 or bf16");
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace anymoe::kernels {

HWY_EXPORT(FloatMatmulRowsImpl);

void FloatMatmulRows(DType weight_type, const uint8_t* w, size_t w_row_bytes, const float* x,
                     int64_t ldx, int64_t t, int64_t k, int64_t n0, int64_t n1, float* y,
                     int64_t ldy) {
  CHECK(t >= 0 && k >= 0 && n0 <= n1 && ldx >= k);
  if (t == 0 || n0 == n1) return;
  HWY_DYNAMIC_DISPATCH(FloatMatmulRowsImpl)
  (weight_type, w, w_row_bytes, x, ldx, t, k, n0, n1, y, ldy);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
