// Op-level conformance of each device backend against the CPU backend (exact
// mode) on random data, for what the golden models do not reach: every weight
// dtype in Matmul, GroupedMatmul and Embedding (quantised ones included; those a
// device lacks run through the CPU fallback, which must agree too).
#include <gtest/gtest.h>

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

  std::mt19937 rng_{1234};
  std::unique_ptr<Backend> dev_, cpu_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

const DType kWeightDtypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

TEST_P(DeviceOps, MatmulEveryWeightDtype) {
  for (DType dtype : kWeightDtypes) {
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
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ6_K}) {
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

INSTANTIATE_TEST_SUITE_P(Backends, DeviceOps, ::testing::Values("opencl", "cuda"));

}  // namespace
}  // namespace anymoe
