#include "cli/matmul_kernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels/cpu_target.h"
#include "backends/cpu/kernels/quant_matmul.h"

namespace anymoe::cli {

std::string CpuMatmulKernelLine(const TensorSource& tensors) {
  std::vector<DType> types;  // in the file's order of first use
  for (const TensorInfo& t : tensors.tensors()) {
    if (t.shape.size() < 2 || t.dtype == DType::kF32 || t.dtype == DType::kI32) continue;
    if (std::find(types.begin(), types.end(), t.dtype) == types.end()) types.push_back(t.dtype);
  }
  std::string line = "cpu matmul (" + kernels::ActiveCpuTarget().name + "):";
  for (size_t i = 0; i < types.size(); ++i) {
    line += std::string(i ? ", " : " ") + std::string(Name(types[i])) + " " +
            kernels::DecodeMatmulKernel(types[i]);
    const int64_t max_rows = kernels::IntegerMatmulMaxRows(types[i]);
    if (kernels::IsQuantMatmulSupported(types[i]) && max_rows != INT64_MAX) {
      line += " to " + std::to_string(max_rows) + " rows, dequant-f32 above";
    }
  }
  return line + "\n";
}

}  // namespace anymoe::cli
