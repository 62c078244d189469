// Prefill attention as tiles: the queries of consecutive tokens of one sequence
// meet each block of keys together while it is in L1/L2. Per kv head a block's
// key and value slices are gathered once into contiguous f32 tiles (f16, q8_0
// and q4_0 read as the f32 they stand for), then scores and weighted values run
// as small GEMMs: several queries per load of a key or value row. Each query
// keeps exactly the arithmetic of attention.cc's one-query pass (the same
// block boundaries from absolute key positions, the same order of every sum),
// so its bits do not depend on the chunk, the tile or the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/attention_tiles.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/attention.h"
#include "backends/cpu/kernels/attention_block-inl.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/quantize_row.h"

// The scratch layout, once per translation unit (outside the per-target code).
#ifndef ANYMOE_KERNELS_ATTENTION_TILES_LAYOUT_
#define ANYMOE_KERNELS_ATTENTION_TILES_LAYOUT_
namespace anymoe::kernels {
namespace {

// A token's segments of keys (one when segment_keys is 0).
int64_t Segments(int64_t n_keys, int64_t segment_keys) {
  return segment_keys > 0 ? (n_keys + segment_keys - 1) / segment_keys : 1;
}

// Floats of scratch: the two tiles, every query's scores for a block, the
// segment partials of every token (MergeSegments' layout), then the queries'
// running states (kStateFloats each).
constexpr int64_t kStateFloats = 8;
struct TileScratch {
  int64_t tile_k, tile_v, scores, partials, token_floats, states, total;

  TileScratch(int64_t n_tokens, int64_t first_keys, int64_t kv_heads, int64_t group, int64_t d_k,
              int64_t d_v, int64_t segment_keys) {
    const int64_t n_h = kv_heads * group;
    const int64_t segments = Segments(first_keys + n_tokens - 1, segment_keys);
    tile_k = 0;
    tile_v = tile_k + kAttentionBlockKeys * d_k;
    scores = tile_v + kAttentionBlockKeys * d_v;
    partials = scores + n_tokens * group * kAttentionBlockKeys;
    token_floats = segments > 1 ? segments * n_h * (d_v + 2) : 0;
    states = (partials + n_tokens * token_floats + 15) / 16 * 16;
    total = states + n_tokens * n_h * kStateFloats;
  }
};

}  // namespace
}  // namespace anymoe::kernels
#endif  // ANYMOE_KERNELS_ATTENTION_TILES_LAYOUT_

HWY_BEFORE_NAMESPACE();
namespace anymoe::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Queries per step of the score and value micro-kernels: their accumulators
// (4 per query) must fit the register file with the row loads beside them.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kTileQueries = 2;  // 16 registers
#else
constexpr int kTileQueries = 4;  // 32 registers
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_MAX_BYTES == 64
// s[x][0..4) = scale * (the sum of the four 128-bit blocks of c_x, in block
// order): SumOfLanes4's last step and FourScores' scale for four queries at
// once. A 4x4 transpose of the blocks puts block m of every query in one
// vector, so three adds and one multiply serve all 16 scores with the same
// order of operations per score.
template <class D, class V>
HWY_INLINE void FourQueryScores(D d, V ca, V cb, V cc, V ce, float scale, float* const* s) {
  const __m512 t0 = _mm512_shuffle_f32x4(ca.raw, cb.raw, 0x44);  // a0 a1 b0 b1
  const __m512 t1 = _mm512_shuffle_f32x4(ca.raw, cb.raw, 0xEE);  // a2 a3 b2 b3
  const __m512 t2 = _mm512_shuffle_f32x4(cc.raw, ce.raw, 0x44);  // c0 c1 e0 e1
  const __m512 t3 = _mm512_shuffle_f32x4(cc.raw, ce.raw, 0xEE);  // c2 c3 e2 e3
  const V x0{_mm512_shuffle_f32x4(t0, t2, 0x88)};                // block 0 of each
  const V x1{_mm512_shuffle_f32x4(t0, t2, 0xDD)};
  const V x2{_mm512_shuffle_f32x4(t1, t3, 0x88)};
  const V x3{_mm512_shuffle_f32x4(t1, t3, 0xDD)};
  const V sum = hn::Mul(hn::Add(hn::Add(hn::Add(x0, x1), x2), x3), hn::Set(d, scale));
  _mm_storeu_ps(s[0], _mm512_castps512_ps128(sum.raw));
  _mm_storeu_ps(s[1], _mm512_extractf32x4_ps(sum.raw, 1));
  _mm_storeu_ps(s[2], _mm512_extractf32x4_ps(sum.raw, 2));
  _mm_storeu_ps(s[3], _mm512_extractf32x4_ps(sum.raw, 3));
}
#endif

// s[i][0..4) = scale * q_i . k_j for NQ queries (q[0..NQ)) and the tile rows
// k_0..k_3 at k, k + d_k, ...: each pair with FourScores' arithmetic (one
// chain per lane over d_k, SumOfLanes4, a scalar tail, then the scale).
template <int NQ>
HWY_INLINE void TileScores(const float* const* q, const float* k, int64_t d_k, float scale,
                           float* const* s) {
  static_assert(NQ == 1 || NQ == 2 || NQ == 4);
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  const float *k0 = k, *k1 = k + d_k, *k2 = k + 2 * d_k, *k3 = k + 3 * d_k;
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto b0 = hn::Zero(d), b1 = hn::Zero(d), b2 = hn::Zero(d), b3 = hn::Zero(d);
  auto c0 = hn::Zero(d), c1 = hn::Zero(d), c2 = hn::Zero(d), c3 = hn::Zero(d);
  auto e0 = hn::Zero(d), e1 = hn::Zero(d), e2 = hn::Zero(d), e3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= d_k; i += lanes) {
    const auto v0 = hn::LoadU(d, k0 + i), v1 = hn::LoadU(d, k1 + i);
    const auto v2 = hn::LoadU(d, k2 + i), v3 = hn::LoadU(d, k3 + i);
    const auto qa = hn::LoadU(d, q[0] + i);
    a0 = hn::MulAdd(qa, v0, a0);
    a1 = hn::MulAdd(qa, v1, a1);
    a2 = hn::MulAdd(qa, v2, a2);
    a3 = hn::MulAdd(qa, v3, a3);
    if constexpr (NQ >= 2) {
      const auto qb = hn::LoadU(d, q[1] + i);
      b0 = hn::MulAdd(qb, v0, b0);
      b1 = hn::MulAdd(qb, v1, b1);
      b2 = hn::MulAdd(qb, v2, b2);
      b3 = hn::MulAdd(qb, v3, b3);
    }
    if constexpr (NQ == 4) {
      const auto qc = hn::LoadU(d, q[2] + i), qe = hn::LoadU(d, q[3] + i);
      c0 = hn::MulAdd(qc, v0, c0);
      c1 = hn::MulAdd(qc, v1, c1);
      c2 = hn::MulAdd(qc, v2, c2);
      c3 = hn::MulAdd(qc, v3, c3);
      e0 = hn::MulAdd(qe, v0, e0);
      e1 = hn::MulAdd(qe, v1, e1);
      e2 = hn::MulAdd(qe, v2, e2);
      e3 = hn::MulAdd(qe, v3, e3);
    }
  }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && HWY_MAX_BYTES == 64
  if constexpr (NQ == 4) {
    if (i == d_k) {  // no scalar tail: the 16 block sums in one vector
      FourQueryScores(d, BlockPartSums4(d, a0, a1, a2, a3), BlockPartSums4(d, b0, b1, b2, b3),
                      BlockPartSums4(d, c0, c1, c2, c3), BlockPartSums4(d, e0, e1, e2, e3), scale,
                      s);
      return;
    }
  }
#endif
  float t[4][4];
  SumOfLanes4(d, a0, a1, a2, a3, t[0]);
  if constexpr (NQ >= 2) SumOfLanes4(d, b0, b1, b2, b3, t[1]);
  if constexpr (NQ == 4) {
    SumOfLanes4(d, c0, c1, c2, c3, t[2]);
    SumOfLanes4(d, e0, e1, e2, e3, t[3]);
  }
  for (int x = 0; x < NQ; ++x) {
    for (int64_t j = i; j < d_k; ++j) {
      t[x][0] = std::fma(q[x][j], k0[j], t[x][0]);
      t[x][1] = std::fma(q[x][j], k1[j], t[x][1]);
      t[x][2] = std::fma(q[x][j], k2[j], t[x][2]);
      t[x][3] = std::fma(q[x][j], k3[j], t[x][3]);
    }
    for (int j = 0; j < 4; ++j) s[x][j] = t[x][j] * scale;
  }
}

// o_i[c] += sum_b p_i[b] v_b[c] for NQ queries over the same n tile rows (v,
// row stride v_stride), for the columns c < PairedValueColumns(d_v): per column
// BlockValues' two chains (even keys onto the output, odd keys from zero,
// then added), two vectors of columns at a time so that each load of a value
// row serves every query.
template <int NQ>
HWY_INLINE void TileValuesPaired(const float* const* p, const float* v, int64_t n,
                                 int64_t v_stride, int64_t c_end, float* const* o) {
  static_assert(NQ == 1 || NQ == 2 || NQ == 4);
  const hn::ScalableTag<float> d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  for (int64_t c = 0; c < c_end; c += 2 * lanes) {
    // Query x's even chain in a{x}0/1, odd chain in b{x}0/1.
    auto a00 = hn::LoadU(d, o[0] + c), a01 = hn::LoadU(d, o[0] + c + lanes);
    auto b00 = hn::Zero(d), b01 = hn::Zero(d);
    auto a10 = hn::Zero(d), a11 = hn::Zero(d), b10 = hn::Zero(d), b11 = hn::Zero(d);
    auto a20 = hn::Zero(d), a21 = hn::Zero(d), b20 = hn::Zero(d), b21 = hn::Zero(d);
    auto a30 = hn::Zero(d), a31 = hn::Zero(d), b30 = hn::Zero(d), b31 = hn::Zero(d);
    if constexpr (NQ >= 2) {
      a10 = hn::LoadU(d, o[1] + c);
      a11 = hn::LoadU(d, o[1] + c + lanes);
    }
    if constexpr (NQ == 4) {
      a20 = hn::LoadU(d, o[2] + c);
      a21 = hn::LoadU(d, o[2] + c + lanes);
      a30 = hn::LoadU(d, o[3] + c);
      a31 = hn::LoadU(d, o[3] + c + lanes);
    }
    int64_t b = 0;
    for (; b + 2 <= n; b += 2) {
      const float* r0 = v + b * v_stride + c;
      const float* r1 = r0 + v_stride;
      const auto x0 = hn::LoadU(d, r0), x1 = hn::LoadU(d, r0 + lanes);
      const auto y0 = hn::LoadU(d, r1), y1 = hn::LoadU(d, r1 + lanes);
      auto pe = hn::Set(d, p[0][b]), po = hn::Set(d, p[0][b + 1]);
      a00 = hn::MulAdd(pe, x0, a00);
      a01 = hn::MulAdd(pe, x1, a01);
      b00 = hn::MulAdd(po, y0, b00);
      b01 = hn::MulAdd(po, y1, b01);
      if constexpr (NQ >= 2) {
        pe = hn::Set(d, p[1][b]);
        po = hn::Set(d, p[1][b + 1]);
        a10 = hn::MulAdd(pe, x0, a10);
        a11 = hn::MulAdd(pe, x1, a11);
        b10 = hn::MulAdd(po, y0, b10);
        b11 = hn::MulAdd(po, y1, b11);
      }
      if constexpr (NQ == 4) {
        pe = hn::Set(d, p[2][b]);
        po = hn::Set(d, p[2][b + 1]);
        a20 = hn::MulAdd(pe, x0, a20);
        a21 = hn::MulAdd(pe, x1, a21);
        b20 = hn::MulAdd(po, y0, b20);
        b21 = hn::MulAdd(po, y1, b21);
        pe = hn::Set(d, p[3][b]);
        po = hn::Set(d, p[3][b + 1]);
        a30 = hn::MulAdd(pe, x0, a30);
        a31 = hn::MulAdd(pe, x1, a31);
        b30 = hn::MulAdd(po, y0, b30);
        b31 = hn::MulAdd(po, y1, b31);
      }
    }
    if (b < n) {  // an odd last key joins the even chain
      const float* r0 = v + b * v_stride + c;
      const auto x0 = hn::LoadU(d, r0), x1 = hn::LoadU(d, r0 + lanes);
      a00 = hn::MulAdd(hn::Set(d, p[0][b]), x0, a00);
      a01 = hn::MulAdd(hn::Set(d, p[0][b]), x1, a01);
      if constexpr (NQ >= 2) {
        a10 = hn::MulAdd(hn::Set(d, p[1][b]), x0, a10);
        a11 = hn::MulAdd(hn::Set(d, p[1][b]), x1, a11);
      }
      if constexpr (NQ == 4) {
        a20 = hn::MulAdd(hn::Set(d, p[2][b]), x0, a20);
        a21 = hn::MulAdd(hn::Set(d, p[2][b]), x1, a21);
        a30 = hn::MulAdd(hn::Set(d, p[3][b]), x0, a30);
        a31 = hn::MulAdd(hn::Set(d, p[3][b]), x1, a31);
      }
    }
    hn::StoreU(hn::Add(a00, b00), d, o[0] + c);
    hn::StoreU(hn::Add(a01, b01), d, o[0] + c + lanes);
    if constexpr (NQ >= 2) {
      hn::StoreU(hn::Add(a10, b10), d, o[1] + c);
      hn::StoreU(hn::Add(a11, b11), d, o[1] + c + lanes);
    }
    if constexpr (NQ == 4) {
      hn::StoreU(hn::Add(a20, b20), d, o[2] + c);
      hn::StoreU(hn::Add(a21, b21), d, o[2] + c + lanes);
      hn::StoreU(hn::Add(a30, b30), d, o[3] + c);
      hn::StoreU(hn::Add(a31, b31), d, o[3] + c + lanes);
    }
  }
}

// Where the cached rows are and how to read one kv head's slice of a block of
// them as f32 (exact for every type).
struct CachedRows {
  DType type;
  const uint8_t* k;
  const uint8_t* v;
  const int32_t* key_ids;
  int64_t k_stride, v_stride;  // bytes
  int64_t k_head, v_head;      // bytes of one kv head's slice
  int64_t d_k, d_v;
  bool shared;  // the values are the first d_v of each key row

  int64_t Row(int64_t j) const { return key_ids != nullptr ? int64_t(key_ids[j]) : j; }

  void Slice(const uint8_t* src, int64_t n, float* dst) const {
    if (type == DType::kF32) {
      std::memcpy(dst, src, size_t(n) * sizeof(float));
    } else if (type == DType::kF16) {
      const hn::ScalableTag<float> d;
      const hn::Rebind<hwy::float16_t, decltype(d)> dh;
      const int64_t lanes = int64_t(hn::Lanes(d));
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + lanes <= n; i += lanes) {
        hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(h + i))),
                   d, dst + i);
      }
      for (; i < n; ++i) dst[i] = AsF32(h[i]);
    } else {
      DequantizeRow(type, src, dst, n);
    }
  }

  // Keys j0 .. j0 + n of kv head h into tk [n, d_k] and, unless shared, tv
  // [n, d_v]; rows n .. round_up(n, 4) of tk are zeroed (the score kernel
  // takes keys four at a time).
  void Gather(int64_t h, int64_t j0, int64_t n, float* tk, float* tv) const {
    for (int64_t b = 0; b < n; ++b) {
      const int64_t row = Row(j0 + b);
      Slice(k + row * k_stride + h * k_head, d_k, tk + b * d_k);
      if (!shared) Slice(v + row * v_stride + h * v_head, d_v, tv + b * d_v);
    }
    std::fill(tk + n * d_k, tk + (n + 3) / 4 * 4 * d_k, 0.0f);
  }
};

// The running softmax of one query over one segment of its keys.
struct QueryState {
  const float* q;
  float* o;       // its output, or its segment's unnormalised output
  int64_t n_keys;  // the keys it attends
  float max, denom;
};
static_assert(sizeof(QueryState) <= kStateFloats * sizeof(float));

// The queries of one kv head over one block of keys (tiles tk, tv, n_all
// rows gathered): scores NQ queries at a time, the softmax update per query,
// then the weighted values NQ queries at a time among those whose block holds
// the same number of keys (a query's count falls short of n_all only in its
// last block).
void BlockOfQueries(QueryState* qs, int64_t n_q, const float* tk, const float* tv,
                    int64_t tv_stride, int64_t j0, int64_t n_all, int64_t d_k, int64_t d_v,
                    float scale, float* scores) {
  constexpr int NQ = kTileQueries;
  const int64_t keys4 = (n_all + 3) / 4 * 4;
  auto count = [&](int64_t x) { return std::min(n_all, qs[x].n_keys - j0); };
  int64_t x = 0;
  for (; x + NQ <= n_q; x += NQ) {
    const float* q[NQ];
    float* s[NQ];
    for (int y = 0; y < NQ; ++y) q[y] = qs[x + y].q;
    for (int64_t b = 0; b < keys4; b += 4) {
      for (int y = 0; y < NQ; ++y) s[y] = scores + (x + y) * kAttentionBlockKeys + b;
      TileScores<NQ>(q, tk + b * d_k, d_k, scale, s);
    }
  }
  for (; x < n_q; ++x) {
    const float* q[1] = {qs[x].q};
    for (int64_t b = 0; b < keys4; b += 4) {
      float* s[1] = {scores + x * kAttentionBlockKeys + b};
      TileScores<1>(q, tk + b * d_k, d_k, scale, s);
    }
  }
  for (x = 0; x < n_q; ++x) {
    SoftmaxUpdate(scores + x * kAttentionBlockKeys, count(x), d_v, qs[x].max, qs[x].denom,
                  qs[x].o);
  }
  const int64_t paired = PairedValueColumns(d_v);
  for (x = 0; x < n_q;) {
    const int64_t n = count(x);
    int64_t y = x + 1;
    while (y < n_q && y - x < NQ && count(y) == n) ++y;
    const float* p[NQ];
    float* o[NQ];
    for (int64_t z = x; z < y; ++z) {
      p[z - x] = scores + z * kAttentionBlockKeys;
      o[z - x] = qs[z].o;
    }
    if (y - x == NQ) {
      TileValuesPaired<NQ>(p, tv, n, tv_stride, paired, o);
    } else {
      for (int64_t z = 0; z < y - x; ++z) TileValuesPaired<1>(p + z, tv, n, tv_stride, paired, o + z);
    }
    for (int64_t z = 0; z < y - x; ++z) {
      BlockValuesTail(p[z], tv, nullptr, 0, n, tv_stride, paired, d_v, o[z]);
    }
    x = y;
  }
}

void AttendTokensImpl(const float* q, int64_t q_token_stride, int64_t n_tokens,
                      int64_t first_keys, int64_t kv_heads, int64_t group, int32_t type,
                      const void* k, const void* v, const int32_t* key_ids, int64_t k_stride,
                      int64_t v_stride, int64_t d_k, int64_t d_v, float scale,
                      int64_t segment_keys, float* out, int64_t out_token_stride,
                      float* scratch) {
  const DType dtype = static_cast<DType>(type);
  const int64_t n_h = kv_heads * group, last_keys = first_keys + n_tokens - 1;
  const int64_t segments = Segments(last_keys, segment_keys);
  const TileScratch layout(n_tokens, first_keys, kv_heads, group, d_k, d_v, segment_keys);
  float* tk = scratch + layout.tile_k;
  float* scores = scratch + layout.scores;
  const bool shared = k == v && k_stride == v_stride;
  const bool quantized = IsRowQuantizable(dtype);
  const int64_t elem = quantized ? 1 : dtype == DType::kF16 ? 2 : 4;
  const CachedRows rows{dtype,
                        static_cast<const uint8_t*>(k),
                        static_cast<const uint8_t*>(v),
                        key_ids,
                        k_stride * elem,
                        v_stride * elem,
                        quantized ? int64_t(BytesFor(dtype, uint64_t(d_k)).value()) : d_k * elem,
                        quantized ? int64_t(BytesFor(dtype, uint64_t(d_v)).value()) : d_v * elem,
                        d_k,
                        d_v,
                        shared};
  float* tv = shared ? tk : scratch + layout.tile_v;
  const int64_t tv_stride = shared ? d_k : d_v;
  // A token's partials: segment s's outputs, then its maxes, then denominators.
  auto partials = [&](int64_t i) { return scratch + layout.partials + i * layout.token_floats; };
  // States per kv head: [head][token][g], rebuilt at every segment start.
  QueryState* states = reinterpret_cast<QueryState*>(scratch + layout.states);
  const int64_t seg_len = segment_keys > 0 ? segment_keys : last_keys;
  for (int64_t s = 0; s < segments; ++s) {
    const int64_t k_begin = s * seg_len, k_end = std::min(k_begin + seg_len, last_keys);
    const int64_t i0 = std::max<int64_t>(0, k_begin + 1 - first_keys);  // first token with keys here
    for (int64_t h = 0; h < kv_heads; ++h) {
      for (int64_t i = i0; i < n_tokens; ++i) {
        const int64_t n_keys = first_keys + i, segs = Segments(n_keys, segment_keys);
        for (int64_t g = 0; g < group; ++g) {
          const int64_t head = h * group + g;
          QueryState& st = states[(h * n_tokens + i) * group + g];
          st.q = q + i * q_token_stride + head * d_k;
          st.o = segs == 1 ? out + i * out_token_stride + head * d_v
                           : partials(i) + (s * n_h + head) * d_v;
          st.n_keys = std::min(n_keys, k_end);
          st.max = -INFINITY;
          st.denom = 0.0f;
          std::fill_n(st.o, d_v, 0.0f);
        }
      }
    }
    for (int64_t j0 = k_begin; j0 < k_end; j0 += kAttentionBlockKeys) {
      const int64_t n_all = std::min(kAttentionBlockKeys, k_end - j0);
      const int64_t first = std::max<int64_t>(i0, j0 + 1 - first_keys);  // tokens with keys here
      if (kv_heads > 1 && !quantized) {
        TouchRows(rows.k, key_ids, j0, n_all, rows.k_stride, kv_heads * rows.k_head);
        if (!shared) TouchRows(rows.v, key_ids, j0, n_all, rows.v_stride, kv_heads * rows.v_head);
      }
      for (int64_t h = 0; h < kv_heads; ++h) {
        rows.Gather(h, j0, n_all, tk, tv);
        BlockOfQueries(states + (h * n_tokens + first) * group, (n_tokens - first) * group, tk, tv,
                       tv_stride, j0, n_all, d_k, d_v, scale, scores);
      }
    }
    for (int64_t h = 0; h < kv_heads; ++h) {
      for (int64_t i = i0; i < n_tokens; ++i) {
        const int64_t segs = Segments(first_keys + i, segment_keys);
        for (int64_t g = 0; g < group; ++g) {
          const QueryState& st = states[(h * n_tokens + i) * group + g];
          if (segs == 1) {
            Scale(1.0f / st.denom, st.o, d_v);
          } else {
            float* maxes = partials(i) + segs * n_h * d_v;
            maxes[s * n_h + h * group + g] = st.max;
            maxes[segs * n_h + s * n_h + h * group + g] = st.denom;
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < n_tokens; ++i) {
    const int64_t segs = Segments(first_keys + i, segment_keys);
    if (segs == 1) continue;
    const float* maxes = partials(i) + segs * n_h * d_v;
    MergeSegments(partials(i), n_h * d_v, maxes, maxes + segs * n_h, segs, n_h, d_v,
                  out + i * out_token_stride, d_v);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace anymoe::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace anymoe::kernels {

HWY_EXPORT(AttendTokensImpl);

int64_t AttendTokensScratch(int64_t n_tokens, int64_t first_keys, int64_t kv_heads, int64_t group,
                            int64_t d_k, int64_t d_v, int64_t segment_keys) {
  return TileScratch(n_tokens, first_keys, kv_heads, group, d_k, d_v, segment_keys).total;
}

void AttendTokens(const float* q, int64_t q_token_stride, int64_t n_tokens, int64_t first_keys,
                  int64_t kv_heads, int64_t group, DType type, const void* k, const void* v,
                  const int32_t* key_ids, int64_t k_stride, int64_t v_stride, int64_t d_k,
                  int64_t d_v, float scale, int64_t segment_keys, float* out,
                  int64_t out_token_stride, float* scratch) {
  CHECK(n_tokens > 0 && first_keys > 0 && d_k > 0 && d_v > 0 && (k != v || d_v <= d_k));
  CHECK(segment_keys == 0 || segment_keys % kAttentionBlockKeys == 0);
  HWY_DYNAMIC_DISPATCH(AttendTokensImpl)
  (q, q_token_stride, n_tokens, first_keys, kv_heads, group, int32_t(type), k, v, key_ids,
   k_stride, v_stride, d_k, d_v, scale, segment_keys, out, out_token_stride, scratch);
}

}  // namespace anymoe::kernels
#endif  // HWY_ONCE
