// y = x . W^T for any weight dtype on the CPU. Quantised weights go through the
// integer kernels of kernels/quant_matmul.h for small T (decode, batched
// decode; every T where the target has register-blocked integer kernels): x is
// quantised once per call and every weight row is read once, in place. f32,
// f16 and bf16 weights, `exact`, and larger T take the batch-invariant f32
// kernels of kernels/float_matmul.h, over tiles of rows dequantised into
// per-thread scratch where the weights are quantised.
#pragma once

#include <span>

#include "backends/backend.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace anymoe::cpu {

using ScratchFn = FunctionRef<float*(int thread, uint64_t floats)>;

// `scratch` gives per-thread tile buffers; `shared` one buffer of at least
// `floats` floats visible to all threads (the quantised activations).
// `exact` keeps activations in f32 (no int8 rounding) for every step.
void Matmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t floats)> shared,
            bool exact, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);

// Several projections of one x. When the integer kernels take all of them, x
// is quantised once and every (projection, row tile) runs in one parallel pass:
// one synchronisation for q/k/v or gate/up instead of one each.
void MultiMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t floats)> shared,
                 bool exact, const Tensor& x, std::span<const Projection> projections);

// Rows [offsets[g], offsets[g+1]) of x times weights[g], all groups in one
// parallel pass when the integer kernels apply (one dispatch for all experts).
void GroupedMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                   bool exact, const Tensor& x, std::span<const Tensor> weights,
                   std::span<const int32_t> offsets, const Tensor& y);

// Several grouped products of the same rows (the experts' gate and up): each
// group's rows are quantised once and all projections run in one region.
void MultiGroupedMatmul(ThreadPool& pool, ScratchFn scratch, FunctionRef<float*(uint64_t)> shared,
                        bool exact, const Tensor& x, std::span<const GroupedProjection> projections,
                        std::span<const int32_t> offsets);

// The most the calls above ask of `shared` and of one thread's `scratch`, in
// floats, for steps of up to `step_tokens` tokens through weights of the
// kinds in `inputs` (ContextShape::matmuls), whatever the kernel target,
// step size or `exact` pick: the activations quantised once per input (int8
// blocks, f32 rows for f16/bf16 weights, both when one input feeds both; a
// grouped call one 64-byte-aligned slice per expert) and a tile of
// dequantised weight rows per thread where no integer kernel runs.
struct MatmulScratchFloats {
  uint64_t shared = 0, per_thread = 0;
};
MatmulScratchFloats MatmulScratchBound(std::span<const MatmulInput> inputs, int64_t step_tokens);

}  // namespace anymoe::cpu
