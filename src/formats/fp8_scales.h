// FP8 block-quantised safetensors checkpoints (DeepSeek-V3, GLM-5 "-FP8"): each
// quantised linear is an F8_E4M3 (or F8_E5M2) weight plus an f32
// `<name>_scale_inv` holding one inverse scale per block of the weight
// (config.json `quantization_config.weight_block_size`, [128, 128] in every
// release). The weights stay FP8 in the mmap; this pairs each with its scales
// after checking them, so a matmul can widen tiles on the fly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/tensor_source.h"

namespace anymoe {

class HfConfig;

struct Fp8Quantization {
  bool declared = false;  // config.json has a quantization_config
  int64_t block_rows = 128, block_cols = 128;
  // Modules the checkpoint keeps unquantised (matched as substrings of a
  // tensor's module name, as transformers does); an FP8 tensor among them is an
  // error.
  std::vector<std::string> modules_to_not_convert;
};

// Reads `quantization_config`: absent gives the [128, 128] default; a method
// other than fp8, a bad block size or a bad list is an error naming the key.
Expected<Fp8Quantization> ReadFp8Quantization(const HfConfig& config);

// Gives every FP8 tensor of `tensors` its scales. Errors (one line naming the
// tensor): an FP8 tensor that is not a matrix, that has no `<name>_scale_inv`,
// whose scales are not f32 or not shaped [ceil(rows / block_rows),
// ceil(cols / block_cols)], or that is listed in modules_to_not_convert.
// `find` looks a tensor up by name (null when absent).
Status AttachFp8Scales(const std::string& where, std::span<TensorInfo> tensors,
                       const TensorInfo* (*find)(const void* ctx, const std::string& name),
                       const void* ctx, const Fp8Quantization& q);

}  // namespace anymoe
