#include "backends/device/memory_budget.h"

#include <algorithm>
#include <cstdio>

namespace anymoe::device {

uint64_t StagingBytes(const MemoryPlan& plan) {
  const uint64_t keys = uint64_t(std::max<int64_t>(plan.kv_tokens, 1));
  const uint64_t step = uint64_t(std::max<int64_t>(plan.max_step_tokens, 1));
  return (uint64_t(4) << 20) + 16 * step * keys + 16 * keys;
}

std::string BytesText(uint64_t bytes) {
  char s[64];
  std::snprintf(s, sizeof(s), "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                double(bytes) / (1 << 20));
  return s;
}

}  // namespace anymoe::device
