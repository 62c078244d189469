// f32 rows into GGUF q8_0 / q4_0 blocks, rounded exactly as the `gguf`
// package's numpy quantisers (and ggml's reference ones) do: what a quantised
// KV cache stores for each new key and value row (--kv-type q8_0 | q4_0).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace anymoe {

// True for the types QuantizeRow writes.
bool IsRowQuantizable(DType t);

// Writes n values (a whole number of 32-value blocks) of `src` as BytesFor(t, n)
// bytes of t's blocks at `dst`. t must be IsRowQuantizable.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace anymoe
