// Op-level conformance of each device backend against the CPU backend (exact
// mode) on random data, for what the golden models do not reach: every weight
// dtype in Matmul, GroupedMatmul and Embedding (quantised ones included; those a
// device lacks run through the CPU fallback, which must agree too), and the
// fused calls of a decode step (FusedMatmul, StepAttention) in every form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/backend.h"
#include "core/half.h"
#include "formats/tensor_source.h"

namespace anymoe {
namespace {

// Offsets of the f16 scale fields in one block of each quantised dtype.
std::vector<int> HalfFields(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
      return {0};
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ6_K:
      return {208};
    case DType::kQ5_0:
    case DType::kIQ4_NL:
    case DType::kIQ2_XXS:
    case DType::kIQ4_XS:
    case DType::kIQ1_S:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
      return {0};
    case DType::kQ5_1:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    default:
      return {};
  }
}

// Random weight bytes of `dtype`: random quants with small, valid scales.
std::vector<uint8_t> RandomWeights(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  const uint64_t bytes = uint64_t(rows) * BytesFor(dtype, uint64_t(cols)).value();
  std::vector<uint8_t> out(bytes);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), scale(0.005f, 0.05f);
  if (!Info(dtype).quantized) {
    for (uint64_t i = 0; i < bytes / (dtype == DType::kF32 ? 4 : 2); ++i) {
      const float v = val(rng);
      if (dtype == DType::kF32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }
  for (auto& b : out) b = uint8_t(rng());
  const int block = Info(dtype).block_bytes;
  for (uint64_t at = 0; at < bytes; at += uint64_t(block)) {
    for (int field : HalfFields(dtype)) {
      const uint16_t h = F32ToF16(scale(rng));
      std::memcpy(out.data() + at + uint64_t(field), &h, 2);
    }
    if (dtype == DType::kIQ1_M) {  // the f16 scale is the top nibbles of the 4 words at 48
      const uint16_t h = F32ToF16(scale(rng));
      for (int i = 0; i < 4; ++i) {
        uint8_t& hi = out[at + 48 + 2 * uint64_t(i) + 1];
        hi = uint8_t((hi & 0x0f) | ((h >> (4 * i)) & 0x0f) << 4);
      }
    }
    if (dtype == DType::kMXFP4) out[at] = uint8_t(118 + rng() % 8);  // e8m0: 2^-9 .. 2^-2
  }
  return out;
}

class DeviceOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto dev = CreateBackend(GetParam(), BackendOptions{.num_threads = 2});
    if (!dev.ok()) GTEST_SKIP() << GetParam() << " unavailable: " << dev.status().message();
    dev_ = std::move(dev).value();
    MemoryPlan plan;
    plan.weights = 16 << 20;
    plan.activations = 16 << 20;
    plan.kv_tokens = 256;
    plan.max_step_tokens = 64;
    plan.buffers = 256;
    ASSERT_TRUE(dev_->ReserveMemory(plan).ok());
    cpu_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2, .exact_matmul = true}))
               .value();
  }

  struct Pair {
    Tensor cpu, dev;
  };

  Pair Weight(DType dtype, int64_t rows, int64_t cols) {
    bytes_.push_back(RandomWeights(dtype, rows, cols, rng_));
    const TensorInfo info{"w", dtype, {rows, cols}, bytes_.back().data(), bytes_.back().size()};
    return Pair{cpu_->PrepareWeight(info).value(), dev_->PrepareWeight(info).value()};
  }

  Pair Activations(int64_t rows, int64_t cols, bool random = true) {
    std::vector<float> v(size_t(rows * cols));
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    for (float& x : v) x = random ? val(rng_) : 0.0f;
    Pair p;
    for (Backend* b : {cpu_.get(), dev_.get()}) {
      buffers_.push_back(b->Allocate(v.size() * 4, "activations").value());
      Tensor t = Tensor::Of(buffers_.back()->base(), DType::kF32, {rows, cols});
      b->WriteF32(v, t);
      (b == cpu_.get() ? p.cpu : p.dev) = t;
    }
    return p;
  }

  // Max |dev - cpu| relative to max |cpu| (1 when cpu is all zeros).
  float RelDiff(const Pair& p) {
    std::vector<float> a(size_t(p.cpu.elements())), b(a.size());
    cpu_->ReadF32(p.cpu, a);
    dev_->ReadF32(p.dev, b);
    float diff = 0, scale = 1e-30f;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::fabs(a[i] - b[i]));
      scale = std::max(scale, std::fabs(a[i]));
    }
    return diff / scale;
  }

  // Max |a - b| of two tensors of the device.
  float DeviceDiff(const Tensor& a, const Tensor& b) {
    std::vector<float> x(size_t(a.elements())), y(x.size());
    dev_->ReadF32(a, x);
    dev_->ReadF32(b, y);
    float diff = 0;
    for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::fabs(x[i] - y[i]));
    return diff;
  }

  std::mt19937 rng_{1234};
  std::unique_ptr<Backend> dev_, cpu_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

const DType kWeightDtypes[] = {
    DType::kF32,    DType::kF16,   DType::kBF16,    DType::kQ8_0,   DType::kQ4_0,  DType::kQ4_1,
    DType::kQ5_0,   DType::kQ5_1,  DType::kIQ4_NL,  DType::kQ2_K,   DType::kQ3_K,  DType::kQ4_K,
    DType::kQ5_K,   DType::kQ6_K,  DType::kIQ2_XXS, DType::kIQ4_XS, DType::kIQ1_S, DType::kIQ1_M,
    DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS, DType::kIQ3_S,  DType::kMXFP4};

// Every OpenCL test skips when the backend cannot be created (no device, no
// plugin): a kernel source that no longer compiles must fail here instead of
// turning them all into skips.
TEST(OpenClKernels, CompileWhereverAnOpenClDeviceExists) {
  auto dev = CreateBackend("opencl", BackendOptions{.num_threads = 2});
  if (!dev.ok() && dev.status().message().find("building the kernels failed") == std::string::npos) {
    GTEST_SKIP() << "opencl unavailable: " << dev.status().message();
  }
  EXPECT_TRUE(dev.ok()) << dev.status().message();
}

TEST_P(DeviceOps, MatmulEveryWeightDtype) {
  const SupportsFn supports = DeviceSupportsTable(GetParam());
  ASSERT_NE(supports, nullptr);
  for (DType dtype : kWeightDtypes) {
    // OpenCL and CUDA decode every dtype listed here themselves (issue 21:
    // the low-bit types of the GLM releases), none through the CPU fallback.
    EXPECT_TRUE(supports(Op::kMatmul, dtype)) << Name(dtype);
    EXPECT_TRUE(supports(Op::kGroupedMatmul, dtype)) << Name(dtype);
    EXPECT_TRUE(supports(Op::kEmbedding, dtype)) << Name(dtype);
    for (int64_t t : {1, 7}) {
      const int64_t k = 512, n = 40;
      const Pair w = Weight(dtype, n, k), x = Activations(t, k), y = Activations(t, n, false);
      const Pair bias = Activations(1, n);
      const Tensor b_cpu = bias.cpu.Reshaped({n}), b_dev = bias.dev.Reshaped({n});
      cpu_->Matmul(x.cpu, w.cpu, &b_cpu, y.cpu);
      dev_->Matmul(x.dev, w.dev, &b_dev, y.dev);
      const float d = RelDiff(y);
      EXPECT_LT(d, 1e-5f) << Name(dtype) << " T=" << t;
      std::printf("[ %s Matmul %-5s T=%lld ] max rel diff %.3g\n", GetParam().c_str(),
                  std::string(Name(dtype)).c_str(), static_cast<long long>(t), d);
    }
  }
}

TEST_P(DeviceOps, GroupedMatmulStackedAndSeparateExperts) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ6_K,
                      DType::kQ2_K, DType::kQ5_1, DType::kIQ2_XXS, DType::kIQ4_XS, DType::kIQ1_M,
                      DType::kIQ3_S, DType::kMXFP4}) {
    const int64_t experts = 4, k = 256, n = 24;
    const std::vector<int32_t> offsets = {0, 3, 3, 7, 9};  // expert 1 has no rows
    const Pair stacked = Weight(dtype, experts * n, k);
    std::vector<Tensor> stacked_cpu, stacked_dev, sep_cpu, sep_dev;
    for (int64_t e = 0; e < experts; ++e) {
      stacked_cpu.push_back(stacked.cpu.RowSlice(e * n, n));
      stacked_dev.push_back(stacked.dev.RowSlice(e * n, n));
      const Pair w = Weight(dtype, n, k);
      sep_cpu.push_back(w.cpu);
      sep_dev.push_back(w.dev);
    }
    const Pair x = Activations(9, k);
    for (bool separate : {false, true}) {
      const Pair y = Activations(9, n, false);
      cpu_->GroupedMatmul(x.cpu, separate ? sep_cpu : stacked_cpu, offsets, y.cpu);
      dev_->GroupedMatmul(x.dev, separate ? sep_dev : stacked_dev, offsets, y.dev);
      EXPECT_LT(RelDiff(y), 1e-5f) << Name(dtype) << (separate ? " separate" : " stacked");
    }
  }
}

TEST_P(DeviceOps, EmbeddingEveryDtype) {
  for (DType dtype : kWeightDtypes) {
    const Pair table = Weight(dtype, 10, 256), out = Activations(4, 256, false);
    const std::vector<int32_t> ids = {3, 0, 9, 3};
    cpu_->Embedding(table.cpu, ids, out.cpu);
    dev_->Embedding(table.dev, ids, out.dev);
    EXPECT_EQ(RelDiff(out), 0.0f) << Name(dtype);  // dequantisation is exact
  }
}

// FusedMatmul (the norm before, up to three projections, SwiGLU or the
// residual add after) against the CPU's separate calls, and on the device
// against the device's own separate calls: a fused kernel must give the
// separate kernels' bits.
TEST_P(DeviceOps, FusedMatmulMatchesTheSeparateCalls) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                      DType::kQ6_K}) {
    for (int64_t t : {1, 7}) {
      const int64_t k = 256, n0 = 40, n1 = 24;
      const Pair x = Activations(t, k), norm_w = Activations(1, k), bias = Activations(1, n1);
      const Pair wq = Weight(dtype, n0, k), wk = Weight(dtype, n1, k), wv = Weight(dtype, n1, k);
      const Pair wg = Weight(dtype, n0, k), wu = Weight(dtype, n0, k), wo = Weight(dtype, n0, k);
      const std::string what = std::string(Name(dtype)) + " T=" + std::to_string(t);
      // Each call runs on both backends (dev: the device's side of each Pair),
      // fused and then separately.
      auto side = [](const Pair& p, bool dev) { return dev ? p.dev : p.cpu; };
      // Norm + three projections, one with a bias (q/k/v).
      const Pair q = Activations(t, n0, false), kk = Activations(t, n1, false),
                 v = Activations(t, n1, false), normed = Activations(t, k, false);
      const Pair q2 = Activations(t, n0, false), kk2 = Activations(t, n1, false),
                 v2 = Activations(t, n1, false);
      for (bool dev : {false, true}) {
        Backend& b = dev ? *dev_ : *cpu_;
        const Tensor nw = side(norm_w, dev).Reshaped({k}), bk = side(bias, dev).Reshaped({n1});
        const Tensor wqt = side(wq, dev), wkt = side(wk, dev), wvt = side(wv, dev);
        const RowNorm norm{&nw, 1e-5f, side(normed, dev)};
        const Projection qkv[] = {{&wqt, nullptr, side(q, dev)},
                                  {&wkt, &bk, side(kk, dev)},
                                  {&wvt, nullptr, side(v, dev)}};
        b.FusedMatmul(side(x, dev), qkv, {.norm = &norm});
        b.RmsNorm(side(x, dev), nw, 1e-5f, side(normed, dev));
        b.Matmul(side(normed, dev), wqt, nullptr, side(q2, dev));
        b.Matmul(side(normed, dev), wkt, &bk, side(kk2, dev));
        b.Matmul(side(normed, dev), wvt, nullptr, side(v2, dev));
      }
      for (const Pair* p : {&q, &kk, &v}) EXPECT_LT(RelDiff(*p), 1e-5f) << "norm+qkv " << what;
      for (auto [fused, separate] : {std::pair{&q, &q2}, {&kk, &kk2}, {&v, &v2}}) {
        EXPECT_EQ(DeviceDiff(fused->dev, separate->dev), 0.0f) << "norm+qkv " << what;
      }
      // Norm + gate/up + SwiGLU, and the residual add.
      const Pair g = Activations(t, n0, false), u = Activations(t, n0, false);
      const Pair g2 = Activations(t, n0, false), u2 = Activations(t, n0, false);
      const Pair residual = Activations(t, n0), residual2 = Activations(t, n0);
      const Pair y = Activations(t, n0, false);
      std::vector<float> start(size_t(t * n0));
      cpu_->ReadF32(residual.cpu, start);
      for (const Pair* r : {&residual, &residual2}) {
        cpu_->WriteF32(start, r->cpu);
        dev_->WriteF32(start, r->dev);
      }
      for (bool dev : {false, true}) {
        Backend& b = dev ? *dev_ : *cpu_;
        const Tensor nw = side(norm_w, dev).Reshaped({k});
        const Tensor wgt = side(wg, dev), wut = side(wu, dev), wot = side(wo, dev);
        const RowNorm norm{&nw, 1e-5f, side(normed, dev)};
        const Projection gate_up[] = {{&wgt, nullptr, side(g, dev)}, {&wut, nullptr, side(u, dev)}};
        b.FusedMatmul(side(x, dev), gate_up, {.norm = &norm, .swiglu = true});
        b.RmsNorm(side(x, dev), nw, 1e-5f, side(normed, dev));
        b.Matmul(side(normed, dev), wgt, nullptr, side(g2, dev));
        b.Matmul(side(normed, dev), wut, nullptr, side(u2, dev));
        b.SwiGlu(side(g2, dev), side(u2, dev), side(g2, dev));
        const Tensor res = side(residual, dev), res2 = side(residual2, dev);
        const Projection o[] = {{&wot, nullptr, side(y, dev)}};
        b.FusedMatmul(side(x, dev), o, {.residual = &res});
        b.Matmul(side(x, dev), wot, nullptr, side(y, dev));
        b.Add(res2, side(y, dev), res2);
      }
      // q6_k's random blocks make dots in the thousands, where SiLU's exp
      // saturates differently in the CPU's vector exp: compared on the device only.
      if (dtype != DType::kQ6_K) {
        EXPECT_LT(RelDiff(g), 1e-5f) << "norm+gate/up+swiglu " << what;
      }
      EXPECT_LT(RelDiff(residual), 1e-5f) << "matmul+residual " << what;
      EXPECT_EQ(DeviceDiff(g.dev, g2.dev), 0.0f) << "norm+gate/up+swiglu " << what;
      EXPECT_EQ(DeviceDiff(residual.dev, residual2.dev), 0.0f) << "matmul+residual " << what;
    }
  }
}

// StepAttention over several sequences of one pool (decode steps: the fused
// launch where the device has one; prefill-shaped steps: the batched form) and
// of separate pools: the attention output and the cache rows written, against
// the CPU's separate calls.
TEST_P(DeviceOps, StepAttentionOverSeveralSequences) {
  const int64_t n_h = 4, n_kv = 2, d = 32, pool_rows = 64;
  std::vector<float> inv_freq(d / 2);
  for (int64_t i = 0; i < d / 2; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * i / d);
  for (RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
    const RopeTable rope{inv_freq, int(d), 0, 1.0f, pairing};
    struct Shape {
      std::vector<int64_t> n_past, rows;
      bool shared_pool;
    };
    for (const Shape& shape : {Shape{{5, 0, 12}, {1, 1, 1}, true}, Shape{{3, 0, 7}, {2, 1, 3}, true},
                               Shape{{4, 9}, {1, 1}, false}}) {
      const size_t n_seq = shape.n_past.size();
      int64_t t = 0;
      for (int64_t r : shape.rows) t += r;
      // Each sequence's key rows: a shuffle of the pool rows, disjoint between sequences.
      std::vector<int32_t> all(pool_rows);
      for (int32_t i = 0; i < pool_rows; ++i) all[size_t(i)] = i;
      std::shuffle(all.begin(), all.end(), rng_);
      std::vector<std::vector<int32_t>> tables(n_seq);
      std::vector<int32_t> positions;
      for (size_t s = 0; s < n_seq; ++s) {
        const int64_t len = shape.n_past[s] + shape.rows[s];
        tables[s].assign(all.begin() + int64_t(s) * 20, all.begin() + int64_t(s) * 20 + len);
        for (int64_t i = 0; i < shape.rows[s]; ++i) positions.push_back(int32_t(shape.n_past[s] + i));
      }
      const Pair q = Activations(t, n_h * d), k = Activations(t, n_kv * d), v = Activations(t, n_kv * d);
      const Pair out = Activations(t, n_h * d, false);
      std::vector<Pair> k_pools, v_pools;
      for (size_t s = 0; s < (shape.shared_pool ? 1 : n_seq); ++s) {
        k_pools.push_back(Activations(pool_rows, n_kv * d));
        v_pools.push_back(Activations(pool_rows, n_kv * d));
      }
      for (bool dev : {false, true}) {
        std::vector<Tensor> kp, vp;
        for (size_t s = 0; s < k_pools.size(); ++s) {
          kp.push_back((dev ? k_pools[s].dev : k_pools[s].cpu).Reshaped({pool_rows, n_kv, d}));
          vp.push_back((dev ? v_pools[s].dev : v_pools[s].cpu).Reshaped({pool_rows, n_kv, d}));
        }
        std::vector<AttentionSegment> segments;
        int64_t row = 0;
        for (size_t s = 0; s < n_seq; ++s) {
          const size_t p = shape.shared_pool ? 0 : s;
          segments.push_back({row, shape.rows[s], &kp[p], &vp[p], tables[s], shape.n_past[s]});
          row += shape.rows[s];
        }
        auto side = [&](const Pair& pair) { return dev ? pair.dev : pair.cpu; };
        (dev ? *dev_ : *cpu_)
            .StepAttention({.q = side(q).Reshaped({t, n_h, d}),
                            .k = side(k).Reshaped({t, n_kv, d}),
                            .v = side(v).Reshaped({t, n_kv, d}),
                            .positions = positions,
                            .rope = &rope,
                            .segments = segments,
                            .scale = 0.125f,
                            .out = side(out).Reshaped({t, n_h, d})});
      }
      const std::string what = "rows " + std::to_string(t) + (shape.shared_pool ? "" : " pools") +
                               (pairing == RopePairing::kInterleaved ? " interleaved" : "");
      EXPECT_LT(RelDiff(out), 1e-5f) << what;
      for (size_t s = 0; s < k_pools.size(); ++s) {
        EXPECT_LT(RelDiff(k_pools[s]), 1e-6f) << what << " keys written";
        EXPECT_EQ(RelDiff(v_pools[s]), 0.0f) << what << " values written";
      }
    }
  }
}

// FP8 weights with block scales (the official GLM-5 / DeepSeek-V3
// checkpoints), decoded by the device kernels themselves: the blocks here are
// [16, 24] so that a 40 x 200 matrix has partial blocks on both edges; views
// that start inside a block row (row slices, stacked experts) read the grid
// rows of the whole matrix.
TEST_P(DeviceOps, Fp8WithBlockScalesInEveryOpAndView) {
  const SupportsFn supports = DeviceSupportsTable(GetParam());
  ASSERT_NE(supports, nullptr);
  // Random FP8 bytes of moderate magnitude (no NaN or inf encodings) and a grid
  // of scales in [0.25, 2]; scales null: a plain FP8 weight.
  auto fp8 = [&](DType dtype, int64_t rows, int64_t cols, bool scaled) {
    std::vector<uint8_t> w(size_t(rows * cols));
    for (uint8_t& b : w) {
      const uint32_t r = rng_();
      b = dtype == DType::kF8_E4M3
              ? uint8_t((r & 0x80) | (4 + (r >> 8) % 6) << 3 | ((r >> 16) & 7))
              : uint8_t((r & 0x80) | (12 + (r >> 8) % 6) << 2 | ((r >> 16) & 3));
    }
    bytes_.push_back(std::move(w));
    TensorInfo info{"w", dtype, {rows, cols}, bytes_.back().data(), bytes_.back().size()};
    if (scaled) {
      const int64_t grid = (rows + 15) / 16 * ((cols + 23) / 24);
      std::vector<uint8_t> g(size_t(grid) * 4 + 1);  // +1: the grid starts unaligned, as in a file
      std::uniform_real_distribution<float> scale(0.25f, 2.0f);
      for (int64_t i = 0; i < grid; ++i) {
        const float v = scale(rng_);
        std::memcpy(g.data() + 1 + 4 * i, &v, 4);
      }
      bytes_.push_back(std::move(g));
      info.scales = BlockScales{bytes_.back().data() + 1, 16, 24};
    }
    return Pair{cpu_->PrepareWeight(info).value(), dev_->PrepareWeight(info).value()};
  };
  for (DType dtype : {DType::kF8_E4M3, DType::kF8_E5M2}) {
    const std::string name(Name(dtype));
    EXPECT_TRUE(supports(Op::kMatmul, dtype)) << name;
    EXPECT_TRUE(supports(Op::kGroupedMatmul, dtype)) << name;
    EXPECT_TRUE(supports(Op::kEmbedding, dtype)) << name;
    const int64_t k = 200, n = 40;
    for (bool scaled : {true, false}) {
      const Pair w = fp8(dtype, n, k, scaled);
      const std::string what = name + (scaled ? " scaled" : " unscaled");
      // Matmul over the whole matrix and over rows 17..39 (a view starting
      // one row into the second block row).
      for (int64_t t : {1, 7}) {
        for (auto [r0, rows] : {std::pair<int64_t, int64_t>{0, n}, {17, n - 17}}) {
          const Pair x = Activations(t, k), y = Activations(t, rows, false);
          cpu_->Matmul(x.cpu, w.cpu.RowSlice(r0, rows), nullptr, y.cpu);
          dev_->Matmul(x.dev, w.dev.RowSlice(r0, rows), nullptr, y.dev);
          EXPECT_LT(RelDiff(y), 1e-5f) << what << " T=" << t << " rows from " << r0;
        }
      }
      // Weights read back (MLA absorption reads kv_b_proj so): exact.
      std::vector<float> a(size_t((n - 17) * k)), b(a.size());
      cpu_->ReadF32(w.cpu.RowSlice(17, n - 17), a);
      dev_->ReadF32(w.dev.RowSlice(17, n - 17), b);
      EXPECT_EQ(a, b) << what << " read back";
      // Embedding rows of the table: exact.
      const Pair out = Activations(4, k, false);
      const std::vector<int32_t> ids = {3, 0, 39, 17};
      cpu_->Embedding(w.cpu, ids, out.cpu);
      dev_->Embedding(w.dev, ids, out.dev);
      EXPECT_EQ(RelDiff(out), 0.0f) << what << " embedding";
    }
    // Three scaled projections of one normed x in one launch, against the CPU
    // and against the device's separate calls.
    const int64_t t = 3, n1 = 24;
    const Pair x = Activations(t, k), norm_w = Activations(1, k);
    const Pair wq = fp8(dtype, n, k, true), wk = fp8(dtype, n1, k, true),
               wv = fp8(dtype, n1, k, true);
    const Pair q = Activations(t, n, false), kk = Activations(t, n1, false),
               v = Activations(t, n1, false);
    const Pair normed = Activations(t, k, false), q2 = Activations(t, n, false),
               kk2 = Activations(t, n1, false), v2 = Activations(t, n1, false);
    for (bool dev : {false, true}) {
      Backend& b = dev ? *dev_ : *cpu_;
      auto side = [dev](const Pair& p) { return dev ? p.dev : p.cpu; };
      const Tensor nw = side(norm_w).Reshaped({k});
      const Tensor wqt = side(wq), wkt = side(wk), wvt = side(wv);
      const RowNorm norm{&nw, 1e-5f, side(normed)};
      const Projection qkv[] = {
          {&wqt, nullptr, side(q)}, {&wkt, nullptr, side(kk)}, {&wvt, nullptr, side(v)}};
      b.FusedMatmul(side(x), qkv, {.norm = &norm});
      b.RmsNorm(side(x), nw, 1e-5f, side(normed));
      b.Matmul(side(normed), wqt, nullptr, side(q2));
      b.Matmul(side(normed), wkt, nullptr, side(kk2));
      b.Matmul(side(normed), wvt, nullptr, side(v2));
    }
    for (const Pair* p : {&q, &kk, &v}) EXPECT_LT(RelDiff(*p), 1e-5f) << name << " norm+qkv";
    for (auto [fused, separate] : {std::pair{&q, &q2}, {&kk, &kk2}, {&v, &v2}}) {
      EXPECT_EQ(DeviceDiff(fused->dev, separate->dev), 0.0f) << name << " norm+qkv";
    }
    // Experts: stacked (row slices of one matrix, 24 rows each, so scaled
    // experts start inside block rows) and separate matrices; scaled ones run
    // a matmul per expert, unscaled ones the grouped kernel.
    const int64_t experts = 4, ne = 24;
    const std::vector<int32_t> offsets = {0, 3, 3, 7, 9};
    for (bool scaled : {true, false}) {
      const Pair stacked = fp8(dtype, experts * ne, k, scaled);
      std::vector<Tensor> stacked_cpu, stacked_dev, sep_cpu, sep_dev;
      for (int64_t e = 0; e < experts; ++e) {
        stacked_cpu.push_back(stacked.cpu.RowSlice(e * ne, ne));
        stacked_dev.push_back(stacked.dev.RowSlice(e * ne, ne));
        const Pair w = fp8(dtype, ne, k, scaled);
        sep_cpu.push_back(w.cpu);
        sep_dev.push_back(w.dev);
      }
      const Pair xe = Activations(9, k);
      for (bool separate : {false, true}) {
        const Pair y = Activations(9, ne, false);
        cpu_->GroupedMatmul(xe.cpu, separate ? sep_cpu : stacked_cpu, offsets, y.cpu);
        dev_->GroupedMatmul(xe.dev, separate ? sep_dev : stacked_dev, offsets, y.dev);
        EXPECT_LT(RelDiff(y), 1e-5f) << name << (scaled ? " scaled" : " unscaled")
                                     << (separate ? " separate" : " stacked") << " experts";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceOps, ::testing::Values("opencl", "cuda"));

}  // namespace
}  // namespace anymoe
