// Runs y = W x through the CPU integer kernels a given number of times, one
// thread, for counting the instructions one call executes under an emulator
// (scripts/arm-insn-count.sh: the count at two repetition counts, differenced,
// is the cost of one call, free of start-up and of timing noise).
//   quant_matmul_calls TYPE K N T REPS [CPU_TARGET [file]]
// TYPE: q8_0 q4_0 q4_1 q4_k q6_k. Each call quantises x and multiplies all N rows,
// from weights stored as panels where the target has panel kernels (what the
// CPU backend does at load; N a multiple of 8), else (or with `file`) in place.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/panel_layout.h"
#include "backends/cpu/kernels/quant_matmul.h"
#include "core/dtype.h"
#include "core/half.h"

using namespace anymoe;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s TYPE K N T REPS [CPU_TARGET]\n", argv[0]);
    return 2;
  }
  DType type = DType::kF32;
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ6_K}) {
    if (Name(t) == argv[1]) type = t;
  }
  const int64_t k = std::atoll(argv[2]), n = std::atoll(argv[3]), t = std::atoll(argv[4]);
  const int reps = std::atoi(argv[5]);
  if (type == DType::kF32 || k <= 0 || k % Info(type).block_elems != 0 || n <= 0 || t <= 0 ||
      t > 4096 || reps < 0) {
    std::fprintf(stderr, "E_ARGS: bad type or shape (k a multiple of the type's block)\n");
    return 2;
  }
  if (argc > 6) {
    const Status st = kernels::SelectCpuTarget(argv[6]);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 2;
    }
  }
  std::mt19937 rng(1);
  const size_t row_bytes = BytesFor(type, uint64_t(k)).value();
  std::vector<uint8_t> w(row_bytes * size_t(n));
  for (auto& b : w) b = uint8_t(rng());
  // Finite f16 scales (and mins): 0x2000 ~ 0.0078.
  const size_t block_bytes = size_t(Info(type).block_bytes);
  for (size_t blk = 0; blk < w.size() / block_bytes; ++blk) {
    uint8_t* p = &w[blk * block_bytes];
    const uint16_t h = 0x2000;
    if (type == DType::kQ6_K) {
      std::memcpy(p + 208, &h, 2);
    } else {
      std::memcpy(p, &h, 2);
      if (type == DType::kQ4_1 || type == DType::kQ4_K) std::memcpy(p + 2, &h, 2);
    }
  }
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(t * k)), y(size_t(t * n));
  for (auto& v : x) v = u(rng);
  const bool panels = kernels::HasPanelKernels(type) && n % kernels::kPanelRows == 0 &&
                      !(argc > 7 && std::strcmp(argv[7], "file") == 0);
  std::vector<uint8_t> packed;
  if (panels) {
    packed.resize(w.size());
    kernels::PackPanels(type, w.data(), n, k, packed.data());
  }
  std::vector<uint8_t> qx(kernels::QuantizedActivationBytes(type, t, k));
  for (int r = 0; r < reps; ++r) {
    kernels::QuantizeActivations(type, x.data(), t, k, qx.data());
    if (panels) {
      kernels::PanelMatmulRows(type, packed.data(), row_bytes, qx.data(), t, k, 0, n, y.data(), n);
    } else {
      kernels::QuantMatmulRows(type, w.data(), row_bytes, qx.data(), t, k, 0, n, y.data(), n);
    }
  }
  std::printf("%s target=%s layout=%s y0=%g\n", argv[1], kernels::ActiveCpuTarget().name.c_str(),
              panels ? "panels" : "file", double(y[0]));
  return 0;
}
