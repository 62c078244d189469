// What the device backends (OpenCL, CUDA) add to a MemoryPlan when they
// reserve device memory at load, and how they write byte counts in the errors
// that explain a budget.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace anymoe::device {

// Staging for one op: index arrays, the [T, max_keys] indexer scratch and the
// router's temporaries, sized from the plan.
uint64_t StagingBytes(const MemoryPlan& plan);

// "N bytes (M.m MiB)".
std::string BytesText(uint64_t bytes);

}  // namespace anymoe::device
