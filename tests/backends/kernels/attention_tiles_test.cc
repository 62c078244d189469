// The tiled prefill attention (AttendTokens) gives every query exactly the bits
// of the one-query kernels it replaces for prefill (AttendOnlineSoftmaxHeads, or
// AttendSegment per segment + MergeSegments): for f32, f16, q8_0 and q4_0 rows,
// keys in order or through a row table, MLA's shared latent rows, across a
// segment boundary, on every compiled Highway target. The one-query kernels
// are checked against double-precision references in attention_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "backends/kernels/for_each_target.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/quantize_row.h"
#include "testing/random_data.h"

namespace anymoe::kernels {
namespace {

using testing::UniformFloats;

// A cache of `keys` rows of kv_heads * d values in `type`: the stored bytes
// and the row stride AttendTokens takes (values for f32 / f16, bytes else).
struct Rows {
  std::vector<uint8_t> bytes;
  int64_t stride;
  Rows(DType type, const std::vector<float>& x, int64_t keys, int64_t row_values) {
    if (type == DType::kF32 || type == DType::kF16) {
      stride = row_values;
      const size_t size = type == DType::kF32 ? 4 : 2;
      bytes.resize(x.size() * size);
      for (size_t i = 0; i < x.size(); ++i) {
        if (type == DType::kF32) {
          std::memcpy(bytes.data() + 4 * i, &x[i], 4);
        } else {
          const uint16_t h = F32ToF16(x[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      }
      return;
    }
    stride = int64_t(BytesFor(type, uint64_t(row_values)).value());
    bytes.resize(size_t(keys * stride));
    for (int64_t j = 0; j < keys; ++j) {
      QuantizeRow(type, x.data() + j * row_values, bytes.data() + j * stride, row_values);
    }
  }
};

// Token i of n_tokens (keys first_keys + i) through the one-query kernels.
void PerToken(DType type, const float* q, int64_t kv_heads, int64_t group, const Rows& k,
              const Rows& v, int64_t n_keys, const int32_t* ids, int64_t d_k, int64_t d_v,
              int64_t segment_keys, float* out) {
  const int64_t n_q = kv_heads * group;
  auto whole = [&](int64_t n, int64_t s, float* o, float* maxes, float* denoms) {
    if (type == DType::kF32 || type == DType::kF16) {
      auto call = [&](auto kp, auto vp) {
        if (maxes == nullptr) {
          AttendOnlineSoftmaxHeads(q, kv_heads, group, d_k, kp, vp, n, ids, k.stride, v.stride,
                                   d_k, d_v, 0.17f, o, d_v);
        } else {
          AttendSegment(q, kv_heads, group, d_k, kp, vp, n, ids, s, k.stride, v.stride, d_k, d_v,
                        0.17f, o, maxes, denoms);
        }
      };
      if (type == DType::kF32) {
        return call(reinterpret_cast<const float*>(k.bytes.data()),
                    reinterpret_cast<const float*>(v.bytes.data()));
      }
      return call(reinterpret_cast<const uint16_t*>(k.bytes.data()),
                  reinterpret_cast<const uint16_t*>(v.bytes.data()));
    }
    if (maxes == nullptr) {
      return AttendOnlineSoftmaxHeads(q, kv_heads, group, d_k, type, k.bytes.data(),
                                      v.bytes.data(), n, ids, k.stride, v.stride, d_k, d_v, 0.17f,
                                      o, d_v);
    }
    AttendSegment(q, kv_heads, group, d_k, type, k.bytes.data(), v.bytes.data(), n, ids, s,
                  k.stride, v.stride, d_k, d_v, 0.17f, o, maxes, denoms);
  };
  const int64_t segments = segment_keys > 0 ? AttentionSegments(n_keys) : 1;
  if (segments == 1) return whole(n_keys, 0, out, nullptr, nullptr);
  std::vector<float> parts(size_t(segments * n_q * d_v)), maxes(size_t(segments * n_q)),
      denoms(maxes.size());
  for (int64_t s = 0; s < segments; ++s) {
    whole(n_keys, s, parts.data() + s * n_q * d_v, maxes.data() + s * n_q,
          denoms.data() + s * n_q);
  }
  MergeSegments(parts.data(), n_q * d_v, maxes.data(), denoms.data(), segments, n_q, d_v, out,
                d_v);
}

// Tokens [0, n_tokens) with keys first_keys + i, AttendTokens over tiles of
// `tile` tokens against PerToken, bit for bit.
void ExpectTilesMatchPerToken(DType type, int64_t kv_heads, int64_t group, int64_t d_k,
                              int64_t d_v, int64_t first_keys, int64_t n_tokens, int64_t tile) {
  const int64_t keys = first_keys + n_tokens - 1, n_q = kv_heads * group;
  const auto q = UniformFloats(size_t(n_tokens * n_q * d_k), 41);
  auto k_raw = UniformFloats(size_t(keys * kv_heads * d_k), 42);
  for (size_t i = 0; i < k_raw.size(); i += 11) k_raw[i] = 3e-6f;  // subnormal in f16
  const Rows k(type, k_raw, keys, kv_heads * d_k);
  const Rows v(type, UniformFloats(size_t(keys * kv_heads * d_v), 43), keys, kv_heads * d_v);
  std::vector<int32_t> table(static_cast<size_t>(keys));
  for (int64_t j = 0; j < keys; ++j) table[size_t(j)] = int32_t((j * 37 + 11) % keys);
  for (const bool select : {false, true}) {
    const int32_t* ids = select ? table.data() : nullptr;
    std::vector<float> tiled(size_t(n_tokens * n_q * d_v)), expected(tiled.size());
    for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
      const int64_t n = std::min(tile, n_tokens - t0);
      std::vector<float> scratch(size_t(AttendTokensScratch(n, first_keys + t0, kv_heads, group,
                                                            d_k, d_v, kAttentionSegmentKeys)));
      AttendTokens(q.data() + t0 * n_q * d_k, n_q * d_k, n, first_keys + t0, kv_heads, group,
                   type, k.bytes.data(), v.bytes.data(), ids, k.stride, v.stride, d_k, d_v, 0.17f,
                   kAttentionSegmentKeys, tiled.data() + t0 * n_q * d_v, n_q * d_v,
                   scratch.data());
    }
    for (int64_t i = 0; i < n_tokens; ++i) {
      PerToken(type, q.data() + i * n_q * d_k, kv_heads, group, k, v, first_keys + i, ids, d_k,
               d_v, kAttentionSegmentKeys, expected.data() + i * n_q * d_v);
    }
    EXPECT_EQ(tiled, expected) << Name(type) << " select=" << select << " tile=" << tile;
  }
}

TEST(AttendTokens, F32AndF16RowsGiveThePerTokenBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    for (const DType type : {DType::kF32, DType::kF16}) {
      // Across the first segment boundary, head dims off the vector width,
      // tiles of 1 and 16 tokens (small: the test also runs under qemu).
      for (const int64_t tile : {1, 16}) {
        ExpectTilesMatchPerToken(type, 2, 2, 20, 12, kAttentionSegmentKeys - 12, 24, tile);
      }
      // From the first key: blocks of 1-3 keys, one query head per kv head.
      ExpectTilesMatchPerToken(type, 3, 1, 64, 64, 1, 70, 32);
    }
  });
}

TEST(AttendTokens, QuantizedRowsGiveThePerTokenBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    for (const DType type : {DType::kQ8_0, DType::kQ4_0}) {
      ExpectTilesMatchPerToken(type, 2, 2, 32, 32, kAttentionSegmentKeys - 10, 20, 7);
    }
  });
}

// MLA: one latent row per key, the values its first d_v entries, no
// segments; every query as AttendOnlineSoftmaxHeads over all its keys.
TEST(AttendTokens, SharedLatentRowsGiveThePerTokenBitsOnEveryTarget) {
  testing::ForEachTarget([] {
    const int64_t n_h = 5, d = 72, d_v = 64, first_keys = 90, n_tokens = 30, tile = 8;
    const int64_t keys = first_keys + n_tokens - 1;
    const auto q = UniformFloats(size_t(n_tokens * n_h * d), 51);
    const auto c = UniformFloats(size_t(keys * d), 52);
    std::vector<int32_t> table(static_cast<size_t>(keys));
    for (int64_t j = 0; j < keys; ++j) table[size_t(j)] = int32_t((j * 13 + 4) % keys);
    for (const bool select : {false, true}) {
      const int32_t* ids = select ? table.data() : nullptr;
      std::vector<float> tiled(size_t(n_tokens * n_h * d_v)), expected(tiled.size());
      for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
        const int64_t n = std::min(tile, n_tokens - t0);
        std::vector<float> scratch(
            size_t(AttendTokensScratch(n, first_keys + t0, 1, n_h, d, d_v, 0)));
        AttendTokens(q.data() + t0 * n_h * d, n_h * d, n, first_keys + t0, 1, n_h, DType::kF32,
                     c.data(), c.data(), ids, d, d, d, d_v, 0.1f, 0,
                     tiled.data() + t0 * n_h * d_v, n_h * d_v, scratch.data());
      }
      for (int64_t i = 0; i < n_tokens; ++i) {
        AttendOnlineSoftmaxHeads(q.data() + i * n_h * d, 1, n_h, d, c.data(), c.data(),
                                 first_keys + i, ids, d, d, d, d_v, 0.1f,
                                 expected.data() + i * n_h * d_v, d_v);
      }
      EXPECT_EQ(tiled, expected) << "select=" << select;
    }
  });
}

}  // namespace
}  // namespace anymoe::kernels
