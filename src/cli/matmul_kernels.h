// Which CPU matmul kernel each weight type of a model file runs on the active
// SIMD target, as `doctor` and `bench` print it: a type that falls to the
// per-row dequantise + f32 path must be visible, not found by a profile.
#pragma once

#include <string>

#include "formats/tensor_source.h"

namespace anymoe::cli {

// One line naming the kernel of every quantised or f16 / bf16 matrix type in
// `tensors` (kernels::DecodeMatmulKernel), with the row count above which
// it gives way to dequant-f32 where there is one, e.g. "cpu matmul
// (avx512-vnni): q4_1 int8-x86, iq2_s int8-x86 to 32 rows, dequant-f32
// above", ending in a newline.
std::string CpuMatmulKernelLine(const TensorSource& tensors);

}  // namespace anymoe::cli
