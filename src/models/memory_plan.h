// Works out the device memory a model will take on a backend before any of it
// is allocated: the loader runs once against a PlanningBackend, which performs
// no op and allocates nothing but adds up what PrepareWeight and Allocate are
// asked for. One source of truth: the plan is whatever the real load will do.
#pragma once

#include <string>

#include "backends/backend.h"
#include "models/model.h"

namespace anymoe {

// The plan for `file` with `options` (kv_cache_tokens of KV cache).
Expected<MemoryPlan> PlanMemory(const ModelFile& file, const LoadOptions& options);

// "6.561 GiB = weights 2.347 GiB + KV cache 0.094 GiB + activations 0.122 GiB
// [+ expert cache 3.998 GiB (routed experts 26.684 GiB stream from the file)]",
// as `info` and `serve` print it.
std::string DescribeMemoryPlan(const MemoryPlan& plan);

}  // namespace anymoe
