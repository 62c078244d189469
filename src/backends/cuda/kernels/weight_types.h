// Weight element types the CUDA kernels decode, as the ints they receive: the
// values of anymoe::DType (core/dtype.h), every one checked against its DType
// by CudaWeightTypes.AreTheDTypeValues (tests/backends, on every machine) and
// some at compile time in cuda_backend.cc. Plain C++: the host compiler
// includes it too.
#pragma once

namespace anymoe::cuda::kernels {

enum WeightType : int {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_1 = 5,
  kQ4_K = 6,
  kQ5_K = 7,
  kQ6_K = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ5_0 = 12,
  kQ5_1 = 13,
  kIQ1_S = 14,
  kIQ1_M = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ2_S = 18,
  kIQ3_XXS = 19,
  kIQ3_S = 20,
  kIQ4_XS = 21,
  kIQ4_NL = 22,
  kMXFP4 = 23,
  kF8_E4M3 = 24,
  kF8_E5M2 = 25
};

}  // namespace anymoe::cuda::kernels
