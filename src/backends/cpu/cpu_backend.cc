#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "formats/tensor_source.h"

namespace anymoe {
namespace {

class HostBuffer final : public Buffer {
 public:
  HostBuffer(void* p, uint64_t size) : p_(p), size_(size) {}
  ~HostBuffer() override { ::operator delete(p_, std::align_val_t(64)); }
  void* base() override { return p_; }
  uint64_t size() const override { return size_; }

 private:
  void* p_;
  uint64_t size_;
};

}  // namespace

CpuBackend::CpuBackend(int num_threads) : pool_(num_threads), scratch_(pool_.num_threads()) {
  // Our pool splits the work; BLAS must not start its own threads underneath it.
  openblas_set_num_threads(1);
}

float* CpuBackend::Scratch(int thread, uint64_t floats) {
  auto& s = scratch_[thread];
  if (s.size() < floats) s.resize(floats);
  return s.data();
}

Expected<std::unique_ptr<Buffer>> CpuBackend::Allocate(uint64_t bytes, const std::string& what) {
  void* p = ::operator new(std::max<uint64_t>(bytes, 64), std::align_val_t(64), std::nothrow);
  if (p == nullptr) {
    return Status::Error("cpu: cannot allocate " + std::to_string(bytes) + " bytes for " + what);
  }
  return std::unique_ptr<Buffer>(new HostBuffer(p, bytes));
}

Expected<Tensor> CpuBackend::PrepareWeight(const TensorInfo& info) {
  if (info.shape.empty() || info.shape.size() > 4) {
    return Status::Error("tensor '" + info.name + "': unsupported rank " +
                         std::to_string(info.shape.size()));
  }
  Tensor t;
  t.base = const_cast<uint8_t*>(info.data);
  t.dtype = info.dtype;
  t.rank = int(info.shape.size());
  std::copy(info.shape.begin(), info.shape.end(), t.shape.begin());
  if (t.rank == 1 && t.dtype != DType::kF32) {
    // Norm weights and biases are read as f32 by the kernels: convert the few
    // small vectors of a bf16/f16 checkpoint once, here.
    ASSIGN_OR_RETURN(auto buf, Allocate(uint64_t(t.elements()) * 4, info.name));
    DequantizeRow(t.dtype, info.data, static_cast<float*>(buf->base()), t.elements());
    t.base = buf->base();
    t.dtype = DType::kF32;
    owned_.push_back(std::move(buf));
  }
  return t;
}

void CpuBackend::Embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const int64_t h = table.cols();
  CHECK(out.cols() == h && out.rows() == int64_t(ids.size()));
  const uint64_t row_bytes = table.row_bytes();
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(ids[i] >= 0 && ids[i] < table.rows());
    DequantizeRow(table.dtype, table.as<const uint8_t>() + ids[i] * row_bytes,
                  out.as<float>() + i * h, h);
  }
}

void CpuBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const int64_t n = x.cols();
  CHECK(weight.dtype == DType::kF32 && weight.elements() == n && out.elements() == x.elements());
  const float* xp = x.as<const float>();
  const float* w = weight.as<const float>();
  float* op = out.as<float>();
  for (int64_t r = 0; r < x.rows(); ++r) cpu::RmsNormRow(xp + r * n, w, eps, n, op + r * n);
}

void CpuBackend::Matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  cpu::Matmul(pool_, [this](int thread, uint64_t n) { return Scratch(thread, n); }, x, w, bias, y);
}

void CpuBackend::Rope(const Tensor& x, std::span<const int32_t> positions,
                      const RopeTable& rope) {
  CHECK(x.rank == 3 && x.dim(0) == int64_t(positions.size()));
  const int64_t heads = x.dim(1), head_dim = x.dim(2);
  float* xp = x.as<float>();
  for (size_t t = 0; t < positions.size(); ++t) {
    cpu::RopeToken(xp + t * heads * head_dim, heads, head_dim, positions[t], rope);
  }
}

void CpuBackend::Attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           int64_t n_past, float scale, const Tensor& out) {
  CHECK(q.rank == 3 && k_cache.rank == 3 && v_cache.rank == 3 && out.rank == 3);
  const int64_t t = q.dim(0), n_h = q.dim(1), d_k = q.dim(2);
  const int64_t n_kv = k_cache.dim(1), d_v = v_cache.dim(2);
  CHECK(k_cache.dim(2) == d_k && n_h % n_kv == 0 && n_past + t <= k_cache.dim(0));
  const int64_t group = n_h / n_kv;
  const float* qp = q.as<const float>();
  const float* kp = k_cache.as<const float>();
  const float* vp = v_cache.as<const float>();
  float* op = out.as<float>();
  const uint64_t max_keys = uint64_t(n_past + t);
  pool_.ParallelFor(t * n_h, [&](int64_t task, int thread) {
    const int64_t ti = task / n_h, h = task % n_h, kvh = h / group;
    cpu::AttendOneQuery(qp + (ti * n_h + h) * d_k, kp + kvh * d_k, vp + kvh * d_v, n_past + ti + 1,
                        n_kv * d_k, n_kv * d_v, d_k, d_v, scale, Scratch(thread, max_keys),
                        op + (ti * n_h + h) * d_v);
  });
}

void CpuBackend::SwiGlu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CHECK(gate.elements() == up.elements() && out.elements() == gate.elements());
  cpu::SwiGluRow(gate.as<const float>(), up.as<const float>(), gate.elements(), out.as<float>());
}

void CpuBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CHECK(a.elements() == b.elements() && out.elements() == a.elements());
  const float* ap = a.as<const float>();
  const float* bp = b.as<const float>();
  float* op = out.as<float>();
  for (int64_t i = 0; i < a.elements(); ++i) op[i] = ap[i] + bp[i];
}

void CpuBackend::Copy(const Tensor& src, const Tensor& dst) {
  CHECK(src.dtype == dst.dtype && src.elements() == dst.elements());
  std::memmove(dst.as<void>(), src.as<const void>(), src.rows() * src.row_bytes());
}

void CpuBackend::ReadF32(const Tensor& src, std::span<float> dst) {
  CHECK(uint64_t(src.elements()) == dst.size());
  for (int64_t r = 0; r < src.rows(); ++r) {
    DequantizeRow(src.dtype, src.as<const uint8_t>() + r * src.row_bytes(),
                  dst.data() + r * src.cols(), src.cols());
  }
}

}  // namespace anymoe
