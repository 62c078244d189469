// MoE routing for one token on the CPU, exactly as transformers does it: f32
// softmax or sigmoid scores, a selection-only bias, group-limited top-k,
// renormalisation and routed scaling. Ties go to the lower expert id, so the
// choice is deterministic.
#pragma once

#include <cstdint>

#include "backends/backend.h"

namespace anymoe::cpu {

// logits [E]; bias [E] or null; writes ids [K] (ascending by rank) and weights [K].
// `scratch` holds at least 3 * E floats.
void RouteToken(const float* logits, const float* bias, int64_t num_experts,
                const RouterSpec& spec, float* scratch, int32_t* ids, float* weights);

}  // namespace anymoe::cpu
